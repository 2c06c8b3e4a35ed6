"""Class F (hidden data), tree side: nothing beyond the base state reaches a sandbox's repository.

A pristine tree's ``.git`` is copied into every view the agent works in, so any object it holds
is readable there with ``git cat-file --batch-all-objects``: a fix the source repository knows
about (a partial clone's promisor pack, a tag, an unreachable object) must never get in. And a
synthesised task's base commit must hold neither build artefacts (``build/lib`` is an unbroken
copy of the package: copying it over solves the task) nor lose a file the tests import.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from deepgym_envs.gitrepo import git_env
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.tasks import Task, load_tasks
from deepgym_envs.trees import pristine_tree
from tests.conftest import NAMESPACE_OK, requires_namespace

ROOT = Path(__file__).resolve().parents[2]
SECRET = "UPSTREAM_FIX_7f3e91"

#: Written independently of deepgym_envs.trees, so a bug there cannot hide here.
_TOP_ARTEFACTS = {"build", "dist", ".eggs"}
_ARTEFACT_SUFFIXES = (".egg-info", ".pyc", ".pyo")
_ARTEFACT_NAMES = {"__pycache__", ".pytest_cache"}


def _artefacts(paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        parts = path.split("/")
        if parts[0] in _TOP_ARTEFACTS or any(p in _ARTEFACT_NAMES or p.endswith(_ARTEFACT_SUFFIXES) for p in parts):
            out.append(path)
    return out


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    # safe.directory: as root a pristine tree belongs to the sandbox's uid, not to us.
    proc = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True,
                          env=git_env())
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def _sandbox(tree: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_sandbox(tree, "namespace" if NAMESPACE_OK else "local")


def _objects_seen_from_inside(task: Task) -> tuple[set[str], set[str], object]:
    """(every object in the view's store, the objects HEAD reaches, `git show` of ``fix``) in a sandbox."""
    tree = pristine_tree(task)
    with _sandbox(tree) as sb:
        listed = sb.exec(["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], 60)
        reachable = sb.exec(["git", "rev-list", "--objects", "HEAD"], 60)
        refs = sb.exec(["git", "for-each-ref", "--format=%(refname)"], 60)
        assert listed.exit_code == 0 and reachable.exit_code == 0, listed.output + reachable.output
        everything = set(listed.stdout.split())
        reached = {line.split()[0] for line in reachable.stdout.splitlines() if line.strip()}
        return everything, reached, refs.stdout.split()


@pytest.fixture
def partial_clone(tmp_path: Path) -> tuple[Path, str, str]:
    """A blob:none partial clone checked out at the base, whose upstream has the fix (and a tag on it)."""
    up = tmp_path / "upstream"
    up.mkdir()
    _git(up, "init", "-q", "-b", "main")
    base = _commit(up, {"lib.py": "def f():\n    return 1\n", "tests/test_lib.py": "def test_x():\n    pass\n"}, "base")
    fix = _commit(up, {"lib.py": f"def f():\n    return 2  # {SECRET}\n"}, f"fix {SECRET}")
    _git(up, "tag", "-a", "-m", SECRET, "v-fix", fix)
    _git(up, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-local", f"file://{up}", str(clone))
    _git(clone, "checkout", "-q", "--detach", base)
    # More that must not travel: an unreachable object, a stash-like ref and a branch on the fix.
    junk = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=clone, input=f"junk {SECRET}\n",
                          capture_output=True, text=True, env=git_env(), check=True).stdout.strip()
    _git(clone, "update-ref", "refs/stash", fix)
    _git(clone, "branch", "later", fix)
    assert list((clone / ".git" / "objects" / "pack").glob("*.promisor"))
    return clone, base, fix + " " + junk


def test_a_partial_clone_hands_only_the_base_commit_to_the_sandbox(partial_clone):
    clone, base, secrets = partial_clone
    fix, junk = secrets.split()
    task = Task(instance_id="hidden__partial", problem_statement="f returns 1",
                FAIL_TO_PASS=["tests/test_lib.py::test_x"], repo_path=str(clone), base_commit=base[:10])
    everything, reached, refs = _objects_seen_from_inside(task)
    assert everything == reached, f"objects HEAD does not reach: {sorted(everything - reached)}"
    assert fix not in everything and junk not in everything
    assert refs in ([], ["refs/heads/main"])  # no tags, no stash, no remote branches
    tree = pristine_tree(task)
    with _sandbox(tree) as sb:
        assert sb.exec(["git", "rev-parse", "HEAD"], 60).stdout.strip() == base
        shown = sb.exec(["git", "show", fix], 60)
        assert shown.exit_code != 0 and SECRET not in shown.output
        assert SECRET not in sb.exec(["git", "log", "--all", "-p"], 60).output
        found = sb.exec(["sh", "-c", "ls .git; ls .git/objects/pack; cat .git/config; "
                                     "test ! -e .git/objects/info/alternates"], 60)
        assert found.exit_code == 0 and ".promisor" not in found.stdout and "remote" not in found.stdout
        assert "logs" not in found.stdout.split()


def test_a_gold_reverse_tree_holds_one_commit_and_nothing_unreachable(toy_task):
    everything, reached, refs = _objects_seen_from_inside(toy_task)
    assert everything == reached
    with _sandbox(pristine_tree(toy_task)) as sb:
        log = sb.exec(["git", "log", "--all", "--format=%H"], 60).stdout.split()
        assert len(log) == 1 and not sb.exists(".git/logs")


def test_a_directory_task_never_carries_build_artefacts_or_loses_ignored_sources(tmp_path, toy_task):
    repo = Path(toy_task.repo_path)
    (repo / ".gitignore").write_text("src/calc/version.py\nbuild/\n")
    (repo / "src/calc/version.py").write_text("VERSION = '0.1.0'\n")
    (repo / "build/lib/calc").mkdir(parents=True)
    (repo / "build/lib/calc/ops.py").write_text((repo / "src/calc/ops.py").read_text())
    (repo / "src/calc.egg-info").mkdir()
    (repo / "src/calc.egg-info/SOURCES.txt").write_text("tests/test_ops.py\n")
    tree = pristine_tree(toy_task)
    committed = _git(tree, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "src/calc/version.py" in committed
    assert _artefacts(committed) == [] and not (tree / "build").exists() and not (tree / "src/calc.egg-info").exists()


def test_an_image_tree_keeps_only_the_snapshot(tmp_path):
    """The docker path replaces the image's .git (which holds the fix's history) with one commit."""
    from deepgym_envs.image_trees import _commit_all

    testbed = tmp_path / "testbed"
    testbed.mkdir()
    _git(testbed, "init", "-q", "-b", "main")
    _commit(testbed, {"lib.py": "def f():\n    return 1\n", "build/lib/x.so": "compiled\n"}, "base")
    fix = _commit(testbed, {"lib.py": f"# {SECRET}\n"}, "fix")
    _git(testbed, "reset", "-q", "--hard", "HEAD~1")
    _commit_all(testbed)
    everything = set(_git(testbed, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())
    reached = {line.split()[0] for line in _git(testbed, "rev-list", "--objects", "HEAD").splitlines()}
    assert everything == reached and fix not in everything
    assert "build/lib/x.so" in _git(testbed, "ls-tree", "-r", "--name-only", "HEAD")  # the image's build stays
    assert not (testbed / ".git" / "logs").exists()


# -- synthesis ------------------------------------------------------------------------------------

_LIB = {
    "pyproject.toml": '[project]\nname = "tinylib"\nversion = "1.0"\n',
    ".gitignore": "src/tinylib/version.py\n",
    # Generated at build time and ignored by git upstream, but shipped (sdist) and imported.
    "src/tinylib/version.py": "VERSION = '1.0'\n",
    "src/tinylib/__init__.py": "from tinylib.version import VERSION\nfrom tinylib.ops import clamp, mean\n",
    "src/tinylib/ops.py": (
        "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n"
        "    return x\n\n\n"
        "def mean(values):\n    if not values:\n        raise ValueError('empty')\n"
        "    return sum(values) / len(values)\n"),
    "tests/test_ops.py": (
        "from tinylib import VERSION, clamp, mean\n\n\n"
        "def test_version():\n    assert VERSION == '1.0'\n\n\n"
        "def test_clamp_below():\n    assert clamp(-3, 0, 10) == 0\n\n\n"
        "def test_clamp_above():\n    assert clamp(50, 0, 10) == 10\n\n\n"
        "def test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
        "def test_mean():\n    assert mean([1, 2, 6]) == 3\n"),
}


def _committed(task: Task, out: Path) -> list[str]:
    """The files of a task's base commit as its repository stores them (a bundle or a bare repository)."""
    from deepgym_envs.trees import unbundled
    from deepgym_envs.untrusted_tree import Origin

    repo = out / task.repo_path
    if repo.is_file():
        repo = unbundled(repo, Origin(str(repo), "repo_path", task.instance_id))
    return _git(repo, "ls-tree", "-r", "--name-only", task.base_commit).split()


@pytest.mark.slow
@requires_namespace
def test_synthesis_commits_no_build_artefacts_and_keeps_ignored_sources(tmp_path):
    from deepgym_envs.synth import SourceSpec, SynthConfig, synthesize

    src = tmp_path / "tinylib"
    src.mkdir()
    _git(src, "init", "-q", "-b", "main")
    # What a source tree looks like after a build: an unbroken copy of the package under build/lib,
    # the egg-info (whose SOURCES.txt names the test files), a dist/ and bytecode.
    artefacts = {"build/lib/tinylib/ops.py": _LIB["src/tinylib/ops.py"], "build/lib/tinylib/version.py": "",
                 "src/tinylib.egg-info/SOURCES.txt": "tests/test_ops.py\n", "dist/tinylib-1.0.tar.gz": "x",
                 "src/tinylib/__pycache__/ops.cpython-311.pyc": "x", ".pytest_cache/v/cache/nodeids": "[]"}
    _commit(src, {**_LIB, **artefacts}, "init")
    out = tmp_path / "out"
    report = synthesize(SourceSpec.parse(f"git:{src}"), out,
                        SynthConfig(max_candidates=4, max_combined=0, workers=1, seed=1, use_host_python=True,
                                    show_progress=False))
    assert report.ok and report.written >= 1, report.to_dict()
    for task in load_tasks(out):  # the base commit's files, whatever layout the repository is stored in
        committed = _committed(task, out)
        assert _artefacts(committed) == [], task.instance_id
        assert "src/tinylib/version.py" in committed


@pytest.mark.parametrize("name", ["synth", "synth-curated"])
def test_committed_synth_tasks_hold_no_build_artefacts(name):
    synth = ROOT / "tasks" / name
    tasks = load_tasks(synth) if any(synth.glob("*.jsonl")) else []
    if not tasks:
        pytest.skip(f"tasks/{name} is not in this checkout")
    bad: dict[str, list[str]] = {}
    for task in tasks:
        if found := _artefacts(_committed(task, synth)):
            bad[task.instance_id] = found[:3]
    assert len(tasks) >= 50
    assert not bad, f"{len(bad)} of {len(tasks)} tasks carry build artefacts, e.g. {next(iter(bad.items()))}"


@requires_namespace
def test_file_times_and_inodes_do_not_point_at_the_gold_files():
    """Building a tree by reverse-applying the gold patch wrote the gold files last: the newest
    mtime named exactly the files to fix in 30 of the 36 built-in tasks (ctime and inode order
    did much the same). Inside the sandbox none of the three may single them out."""
    import warnings

    from deepgym_envs import load_tasks
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.tasks import patch_paths

    hits = {"%T@": 0, "%C@": 0, "%i": 0}
    tasks = load_tasks("builtin")
    for task in tasks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            box = make_sandbox(pristine_tree(task), "namespace")
        with box:
            gold = set(patch_paths(task.patch))
            for key in hits:
                out = box.exec(["sh", "-c", f"find . -path ./.git -prune -o -type f -printf '{key} %P\\n' "
                                            "| sort -n | tail -1"]).stdout.split()
                hits[key] += out[-1] in gold
    # Path order alone may land on a gold file now and then; the old build did it almost always.
    assert all(n <= len(tasks) // 6 for n in hits.values()), hits


def test_inode_order_in_every_directory_follows_the_paths(tmp_path, monkeypatch):
    """ext4 hands a new file the first free inode of its group: rewriting each file while freeing
    its old one passed the gold files' late slots on, and the audit's leak scan caught a gold file
    with the highest inode in CI. Every copy is made before any old file goes, so the order is the
    paths' and nothing else (here on the filesystem the tree cache is on)."""
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    out_of_order = []
    for task in load_tasks("builtin")[:12]:
        tree = pristine_tree(task)
        for root, dirs, files in os.walk(tree):
            dirs[:] = [d for d in dirs if d != ".git"]
            names = sorted(f for f in files if not os.path.islink(os.path.join(root, f)))
            inodes = [os.lstat(os.path.join(root, f)).st_ino for f in names]
            if inodes != sorted(inodes):
                out_of_order.append(os.path.relpath(root, tree.parent))
    assert out_of_order == []


def test_a_copy_installed_for_another_bound_python_is_hidden_too(tmp_path):
    """A venv binds its base interpreter's prefix as well, and a task's Python is bound whole: a
    deepgym installed there (gold patches in its _tasks) showed through, since only this Python's
    own site-packages were looked at (CI in a venv over a Python with deepgym installed)."""
    from deepgym_envs.sandbox.hidden import hidden_paths

    prefix = tmp_path / "python3.11"
    copy = prefix / "lib" / "python3.11" / "site-packages" / "deepgym_envs"
    (copy / "_tasks").mkdir(parents=True)
    (copy / "_tasks" / "set.jsonl").write_text('{"FAIL_TO_PASS": []}\n')
    assert os.path.realpath(copy) in hidden_paths((str(prefix),))


@requires_namespace
def test_an_installed_release_of_the_project_under_test_is_hidden(tmp_path, toy_task):
    """A later release of the project in a bound site-packages holds the fix: the audit's leak scan
    found sympy's (a dependency of torch) in deepgym's own interpreter, readable from every sympy
    task's sandbox. Installed copies of the tree's own packages are covered; the tree's is imported."""
    from deepgym_envs.pyenv import PythonEnv, create_venv, finish_env

    prefix = tmp_path / "env"
    create_venv(prefix)
    finish_env(prefix, PythonEnv((), ("src",)))
    site = next(prefix.glob("lib/python*/site-packages"))
    (site / "calc").mkdir()
    (site / "calc" / "__init__.py").write_text("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))  # the fix\n")
    (site / "attrs_like").mkdir()  # any other package stays visible
    (site / "attrs_like" / "__init__.py").write_text("")
    with make_sandbox(pristine_tree(toy_task), "namespace", python_prefix=str(prefix), pythonpath=["src"]) as sb:
        seen = sb.exec(["bash", "-c", f"ls -A {site.resolve()}/calc | wc -l; ls {site.resolve()} | grep -c attrs_like; "
                                      "python -c 'import calc; print(calc.__file__)'"])
        assert seen.exit_code == 0 and seen.stdout.split() == ["0", "1", "/testbed/src/calc/__init__.py"], seen.output


@requires_namespace
def test_no_task_file_is_readable_inside_whatever_the_install_mode():
    """An editable install still copies the built-in task files (gold patches, hidden tests) into
    site-packages/deepgym_envs/_tasks, and the interpreter's directory is bound into every sandbox:
    the audit's leak scan found them there. No task row may be readable from inside."""
    import sys

    from deepgym_envs import load_tasks
    from deepgym_envs.sandbox import make_sandbox

    task = load_tasks("builtin")[0]
    roots = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *__import__("site").getsitepackages())
                    if os.path.isdir(p)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = make_sandbox(pristine_tree(task), "namespace")
    with box:
        res = box.exec(["grep", "-rlF", "--include=*.jsonl", "FAIL_TO_PASS", *roots, "/deepgym", "/tmp"])
    assert res.stdout.strip() == "", res.stdout


@requires_namespace
def test_a_task_with_its_own_environment_sees_no_other_pythons_packages(tmp_path, toy_task):
    """A task's environment imports nothing from deepgym's interpreter, its base or the system's
    Pythons, yet their site-packages were bound whole: the audit's leak scan found gold lines in
    setuptools' vendored more_itertools, ray's vendored tabulate and an installed xmltodict.py,
    none of them a package the tree holds. Least privilege: with an environment of its own, a
    sandbox shows no other Python's installed packages at all; the standard library stays."""
    import glob
    import site
    import sys

    from deepgym_envs.pyenv import PythonEnv, create_venv, finish_env

    prefix = tmp_path / "env"
    create_venv(prefix)
    finish_env(prefix, PythonEnv((), ("src",)))
    (next(prefix.glob("lib/python*/site-packages")) / "own_dep.py").write_text("X = 1\n")
    others = sorted({os.path.realpath(p) for p in (
        *site.getsitepackages(), *glob.glob(os.path.join(glob.escape(sys.base_prefix), "lib*", "python*", "site-packages")),
        *glob.glob("/usr/lib/python3*/*-packages"), *glob.glob("/usr/local/lib/python3*/*-packages"))
        if os.path.isdir(p) and os.listdir(p)})
    assert others, "this test needs a non-empty site-packages to look at"
    with make_sandbox(pristine_tree(toy_task), "namespace", python_prefix=str(prefix), pythonpath=["src"]) as sb:
        seen = sb.exec(["bash", "-c", "for d in \"$@\"; do echo \"$d $(ls -A \"$d\" | wc -l)\"; done; "
                                      "python -c 'import json, own_dep, calc; print(calc.__file__)'", "-", *others])
    lines = seen.stdout.splitlines()
    assert seen.exit_code == 0 and lines[-1] == "/testbed/src/calc/__init__.py", seen.output
    assert lines[:-1] == [f"{d} 0" for d in others], seen.output
