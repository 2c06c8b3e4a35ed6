"""``deepgym tasks import``: SWE-bench-shaped rows in, a task set deepgym loads out.

For SWE-bench (full, Lite, Verified), SWE-Gym or SWE-smith rows, as JSONL, a JSON array or object
of rows, Parquet / Arrow or a ``datasets`` directory (SWE-smith's rows, another shape, go through
:mod:`deepgym_envs.swesmith_import`). Per row:

1. the repository comes from a local mirror, ``REPOS/owner__name`` (a clone, bare or not; ``git
   clone --mirror https://github.com/owner/name REPOS/owner__name`` makes one). Where the network
   allows, ``REPOS`` may instead be a URL template holding ``{repo}``
   (``https://github.com/{repo}.git``, ``git@host:{repo}``, ``file:///srv/git/{repo}.git``): each
   repository the rows name is then cloned once (``git clone --mirror``, full objects, never a
   partial clone) into ``OUT/.mirrors/owner__name`` and imported from there; a later run reuses
   that clone. The row's ``repo`` is untrusted: it must read ``owner/name`` before it goes into
   the URL, and git may use only the file, git, http(s) and ssh transports;
2. the base commit alone is fetched from it into ``OUT/repos/<instance_id>``: a fresh repository
   holding one commit (a shallow fetch, so the commit keeps the row's id) and nothing it does not
   reach, never a clone (no refs, tags, later history or the upstream fix);
3. the row is written to ``OUT/tasks.jsonl`` as it was, plus ``repo_path`` and the environment
   from :mod:`deepgym_envs.swebench_specs` (``python_env``, ``test_cmd``), and ``deepgym_spec``
   saying which entry was used (``generic`` for a repository the table lacks). The row's own
   ``python_env``, then ``env_overrides``, win over the table; otherwise what the base and
   environment set-up commits declare completes it (:mod:`deepgym_envs.swebench_envs`).

With ``images=True`` (``--images``), a row whose SWE-bench instance image is on the docker engine
(``sweb.eval.x86_64.<id>:latest``, or the published ``swebench/...`` name: see
:func:`deepgym_envs.image_trees.swebench_image_names`; pulled first only with ``pull=True``) is
imported from the image instead: no ``repo_path`` and no ``python_env`` (the image's conda env
``testbed`` is the environment), ``image`` naming it, ``test_cmd`` from the spec table. Its
``/testbed`` is copied out and checked against ``base_commit`` at import, as grading will take it
(:mod:`deepgym_envs.image_trees`). A row without an image falls back to ``repos`` when given.

A row that cannot be imported (no mirror, a clone that failed, a commit the mirror lacks, a mirror
missing objects, a git failure, a malformed row, no image and no mirrors, a row of pytest itself:
:data:`RUNNER_PROJECTS`, a test patch the official harness cannot run:
:func:`~deepgym_envs.tasks.harness_cannot_run`) is reported in one line with the reason and the
fix, and the others go on; the run's exit status says whether any failed. Nothing of the repository runs:
git only clones and reads the mirror.

>>> report = import_rows("swe-bench-lite.jsonl", "lite", "mirrors")   # doctest: +SKIP
>>> [(r.instance_id, r.status) for r in report.rows][:1]
[('psf__requests-2317', 'imported')]
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

from deepgym_envs.docker_engine import engine
from deepgym_envs.errors import DeepgymError, GitError, InfrastructureError, SandboxUnavailable, TaskFormatError
from deepgym_envs.gitrepo import copy_tracked, git_env, init_repo, run_git, safe_name, seal_object_store
from deepgym_envs.hfdata import dataset_rows, is_dataset
from deepgym_envs.image_trees import image_task_tree, swebench_image_names
from deepgym_envs import swesmith_import
from deepgym_envs.swebench_envs import SETUP_FILE_BYTES, EnvOverrides, choose_python_env, load_env_overrides
from deepgym_envs.swebench_ids import translate
from deepgym_envs.swebench_specs import known_repos, spec_for
from deepgym_envs.tasks import files_of_test_patch, harness_cannot_run, patch_paths, task_from_row
from deepgym_envs.trees import cache_root, check_commit_size, source_git_dir
from deepgym_envs.untrusted_tree import Origin, TreeCaps, escaping_links

#: The task file an import writes.
TASKS_FILE = "tasks.jsonl"


@dataclass
class ImportedRow:
    instance_id: str
    status: str
    """``imported`` or ``error``."""
    spec: str = ""
    """The spec table entry used (``owner/name@version``, or ``generic``)."""
    reason: str = ""
    image: str = ""
    """The SWE-bench instance image the row runs in (``--images``); empty for a row from a mirror."""


@dataclass
class ImportReport:
    out: Path
    rows: list[ImportedRow] = field(default_factory=list)
    cloned: list[str] = field(default_factory=list)
    """The repositories this run cloned from a URL template (each once), in the order cloned."""

    @property
    def failed(self) -> list[ImportedRow]:
        return [r for r in self.rows if r.status != "imported"]


def read_rows(source: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(file, line, row) of a JSONL file, a JSON file holding an array of rows (``[{...}, ...]``)
    or an object of rows keyed by instance id (``{"id": {...}, ...}``), a directory of JSONL
    files, or a dataset (Parquet, Arrow, ``datasets``). A row that is not a JSON object is
    yielded as ``{"__error__": why}``; a file that holds no rows in any of these shapes is a
    :class:`TaskFormatError` saying what it holds."""
    path = Path(source).expanduser()
    if is_dataset(path) and not (path.is_dir() and any(path.glob("*.jsonl"))):
        yield from dataset_rows(path)
        return
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise TaskFormatError(str(path), None, None, "no such JSONL or JSON file, directory of JSONL files, "
                                                     "or dataset")
    for file in files:
        text = file.read_text(encoding="utf-8")
        whole = _json_document(str(file), text)
        if isinstance(whole, list):
            yield from _array_rows(str(file), text)
        elif isinstance(whole, dict) and "instance_id" in whole:  # one row, on one line or several
            yield str(file), 1, whole
        elif isinstance(whole, dict):
            yield from _object_rows(str(file), whole)
        else:  # JSON Lines
            yield from _jsonl_rows(str(file), text)


def _json_document(file: str, text: str) -> Any:
    """``text`` read as one JSON document where it is one (an array or an object), else None (JSON
    Lines). A malformed array, or a malformed ``.json`` file, is one error, not one per line."""
    first = text.lstrip()[:1]
    if first not in ("[", "{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" or (first == "{" and not file.endswith(".json")):
            return None  # several documents: JSON Lines (a bad line is that row's error)
        raise TaskFormatError(file, exc.lineno, None, f"invalid JSON at column {exc.colno}: {exc.msg} (a .json "
                                                      "file holds one array or object of rows)") from None


def _jsonl_rows(file: str, text: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield file, lineno, _a_row(json.loads(line))
        except json.JSONDecodeError as exc:
            yield file, lineno, {"__error__": f"invalid JSON: {exc.msg}"}


def _array_rows(file: str, text: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The elements of a JSON array, each with the line it starts on."""
    decoder, at = json.JSONDecoder(), text.index("[") + 1
    while True:
        at = _skip(text, at, " \t\r\n,")
        if at >= len(text) or text[at] == "]":
            return
        row, end = decoder.raw_decode(text, at)  # the whole text parsed already: this cannot fail
        yield file, text.count("\n", 0, at) + 1, _a_row(row)
        at = end


def _object_rows(file: str, rows: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """An object of rows keyed by instance id; a row without ``instance_id`` takes its key."""
    if not rows or not all(isinstance(v, dict) for v in rows.values()):
        raise TaskFormatError(file, None, None, "a JSON object that is neither a row (no instance_id) nor an "
                                                "object of rows keyed by instance_id: pass JSON Lines, one row "
                                                "per line, or a JSON array of rows")
    for n, (key, row) in enumerate(rows.items(), start=1):
        yield file, n, {"instance_id": key, **row}


def _a_row(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
    return {"__error__": f"expected a row (a JSON object), got a JSON {kind}"}


def _skip(text: str, at: int, chars: str) -> int:
    while at < len(text) and text[at] in chars:
        at += 1
    return at


def import_rows(source: str | Path, out: str | Path, repos: str | Path | None = None, *, workers: int = 4,
                host_python: str = "", images: bool = False, pull: bool = False,
                env_overrides: str | Path | None = None) -> ImportReport:
    """Import every row of ``source`` into the task set ``out`` (see the module's docstring).

    ``repos`` is a directory of mirrors, or a URL template holding ``{repo}`` to clone them from;
    with ``images``, rows whose SWE-bench instance image is on the docker engine (pulled with
    ``pull``) run in it, and ``repos`` (optional then) serves the others. ``env_overrides``: a JSON
    file of ``python_env`` objects by instance id, ``owner/name@version`` or ``owner/name``, which win
    over the spec table (a row's own ``python_env`` wins over both: :mod:`deepgym_envs.swebench_envs`).
    """
    import sys

    if repos is None and not images:
        raise TaskFormatError(str(source), None, None, "nowhere to take the repositories from: pass --repos "
                              "(mirrors or a URL template) or --images (SWE-bench instance images)")
    host_python = host_python or f"{sys.version_info.major}.{sys.version_info.minor}"
    out = Path(out).resolve()
    (out / "repos").mkdir(parents=True, exist_ok=True)
    where: Path | CloneCache | None = None
    if repos is not None and "{repo}" in str(repos):
        where = CloneCache(str(repos), out / ".mirrors")
    elif repos is not None:
        where = Path(repos).expanduser().resolve()
    finder = InstanceImages(pull) if images else None
    overrides = load_env_overrides(env_overrides) if env_overrides is not None else None
    rows = list(read_rows(source))
    report = ImportReport(out)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda r: _import_one(*r, out=out, repos=where, host_python=host_python,
                                                      images=finder, overrides=overrides), rows))
    seen: set[str] = set()
    lines = []
    for (result, row) in results:
        if result.status == "imported" and result.instance_id in seen:
            result.status, result.reason = "error", "duplicate instance_id (the first row with it was kept)"
        if result.status == "imported":
            seen.add(result.instance_id)
            lines.append(json.dumps(row) + "\n")
        report.rows.append(result)
    (out / TASKS_FILE).write_text("".join(lines), encoding="utf-8")
    report.cloned = list(where.cloned) if isinstance(where, CloneCache) else []
    return report


def _import_one(file: str, line: int, row: dict[str, Any], *, out: Path, repos: Path | CloneCache | None,
                host_python: str, images: InstanceImages | None = None,
                overrides: EnvOverrides | None = None) -> tuple[ImportedRow, dict[str, Any]]:
    instance_id = str(row.get("instance_id") or f"{file}:{line}")
    if "__error__" in row:
        return ImportedRow(instance_id, "error", reason=f"{file}:{line}: {row['__error__']}"), row
    try:
        if swesmith_import.is_swesmith_row(row):  # a synthesised bug in a real commit: another shape
            published = row
            spec_key, reason, row = swesmith_import.import_row(
                row, file=file, line=line, out=out, host_python=host_python, mirror_of=partial(_mirror_of, repos),
                fetch=fetch_commit)
            row["python_env"], note = choose_python_env(published, row["python_env"], overrides, file, line)
            return ImportedRow(instance_id, "imported", spec_key, "; ".join(x for x in (note, reason) if x)), row
        for name in ("repo", "base_commit"):
            if not isinstance(row.get(name), str) or not row[name]:
                raise TaskFormatError(file, line, name, "missing: a SWE-bench row names its repository and base commit")
        published = row
        row = {k: v for k, v in row.items() if k not in ("repo_path", "python_env", "test_cmd", "harness")}
        task_from_row(row, path=file, line=line)  # the row's own fields, checked as the loader will
        if row["repo"] in RUNNER_PROJECTS:
            raise TaskFormatError(file, line, "repo", RUNNER_PROJECTS[row["repo"]])
        dest_name = safe_name(instance_id)
        origin = Origin(f"{file}:{line}", "base_commit", instance_id)
        image = images.find(instance_id) if images else None
        if image:
            _refuse_unrunnable(row, origin, None)  # the tree is the image's: the patch alone decides
            return _import_from_image(row, image, origin), row
        if repos is None:
            raise InfrastructureError(images.missing(instance_id) if images else "no --repos")
        if isinstance(repos, CloneCache):
            mirror = repos.mirror(row["repo"], origin)
        else:
            mirror = find_mirror(repos, row["repo"])
        has_src = fetch_commit(mirror, row["base_commit"], out / "repos" / dest_name, origin)
        _refuse_unrunnable(row, origin, out / "repos" / dest_name)
        spec = spec_for(row["repo"], str(row.get("version") or ""), has_src=has_src)
        readers = [commit_reader(mirror, published.get(key), origin)
                   for key in ("base_commit", "environment_setup_commit")]
        env, note = choose_python_env(published, spec.python_env(host_python), overrides, file, line,
                                      [r for r in readers if r is not None])
        row.update(repo_path=f"repos/{dest_name}", python_env=env,
                   test_cmd=list(spec.test_cmd), harness="swebench", deepgym_spec=spec.key)
        if spec.trust:  # what the environment's packages need at import (validate lists the relaxed tasks)
            row["trust"] = sorted({*row.get("trust", ()), *spec.trust})
        reason = note or _spec_note(row["repo"], str(row.get("version") or ""), spec.key, spec.notes, out)
        if spec.parser != "pytest":
            unmatched = _unmatched_note(translate_ids(row, spec.parser, out / "repos" / dest_name, origin))
            reason = "; ".join(x for x in (unmatched, reason) if x)
        if images:
            why = "no docker engine" if images.client is None else "no instance image"
            reason = "; ".join(x for x in (f"{why}: imported from its mirror", reason) if x)
        return ImportedRow(instance_id, "imported", spec.key, reason), row
    except (DeepgymError, OSError) as exc:
        return ImportedRow(instance_id, "error", reason=" ".join(str(exc).split())), row  # one line


#: Projects whose rows are refused by name, and why: the sealed runner (pytest and pluggy, loaded
#: from the interpreter, never from the workspace) cannot grade the project that is the runner.
RUNNER_PROJECTS = {
    repo: f"{repo} rows are not imported: deepgym grades with the environment's own pytest, sealed against "
          f"the code under test, and this project is {what}, which the repository under test would replace; "
          "no python_env or spec changes that, so leave these rows out of the set"
    for repo, what in (("pytest-dev/pytest", "pytest itself"), ("pytest-dev/pluggy", "pytest's plugin manager"))
}


def _refuse_unrunnable(row: dict[str, Any], origin: Origin, tree: Path | None) -> None:
    """Refuse a row whose test command the official harness cannot run (a deleted test file, a name
    its shell splits, a name it reads wrongly that ``tree`` after the test patch lacks)."""
    test_patch = str(row.get("test_patch") or "")
    exists = test_patch_files(tree, test_patch, origin)[1].__contains__ if tree is not None and test_patch else None
    why = harness_cannot_run(test_patch, exists)
    if why:
        raise TaskFormatError(origin.source, None, "test_patch", f"{why}; leave the row out or fix its test_patch")


def _spec_note(repo: str, version: str, key: str, notes: str, out: Path) -> str:
    """What the import report says about the environment a row gets: the spec's notes, or that
    the repository (or its version) is unsupported and what runs it instead."""
    if key != "generic":
        return f"spec note: {notes}" if notes else ""
    what = (f"unsupported version: version {version!r} of {repo} is not in deepgym's spec table (other versions are)"
            if repo in known_repos() else f"unsupported repository: {repo} is not in deepgym's spec table")
    return (f"{what}; imported with the generic spec (deepgym's Python, pytest only): "
            f"`deepgym tasks validate {out}` says whether its tests run there")


def commit_reader(mirror: Path, commit: object, origin: Origin) -> Callable[[str], str | None] | None:
    """``read(path)``: the text of a file at ``commit`` (the row's) in ``mirror``
    (None where it is missing or over :data:`~deepgym_envs.swebench_envs.SETUP_FILE_BYTES`); None
    when ``commit`` is not a commit id or the mirror lacks it. git reads the files; nothing runs."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return None
    gitdir = source_git_dir(mirror, Origin(str(mirror), "repo", origin.instance_id))
    base = ["-c", "safe.directory=*", "--no-replace-objects", f"--git-dir={gitdir}"]
    env = {"GIT_NO_LAZY_FETCH": "1"}
    if not run_git([*base, "rev-parse", "-q", "--verify", f"{commit}^{{commit}}"], env=env, check=False).strip():
        return None

    def read(path: str) -> str | None:
        size = run_git([*base, "cat-file", "-s", f"{commit}:{path}"], env=env, check=False).strip()
        if not size.isdigit() or int(size) > SETUP_FILE_BYTES:
            return None
        return run_git([*base, "cat-file", "blob", f"{commit}:{path}"], env=env, check=False,
                       limit=SETUP_FILE_BYTES + 1)
    return read


def _unmatched_note(unmatched: list[str]) -> str:
    if not unmatched:
        return ""
    return (f"{len(unmatched)} published test id(s) name no test of the test patch's files, kept as "
            f"published (they grade missing): {', '.join(unmatched[:3])}")


def _import_from_image(row: dict[str, Any], image: str, origin: Origin) -> ImportedRow:
    """``row`` (cleaned, checked) made to run in ``image``: no ``repo_path``, no ``python_env``
    (the image's conda env ``testbed`` runs the tests), the spec's ``test_cmd``. The image's
    ``/testbed`` is copied out and checked against ``base_commit`` now, into the cache grading
    reads (:mod:`deepgym_envs.image_trees`), and the ids of a non-pytest parser are translated
    from that copy."""
    spec = spec_for(row["repo"], str(row.get("version") or ""))
    row.update(image=image, test_cmd=list(spec.test_cmd), harness="swebench", deepgym_spec=spec.key)
    tree = image_task_tree(task_from_row(row, path=origin.source, line=None), cache_root())
    if tree is None:  # image_task_tree returns None only for rows with a repo_path, which this row lacks
        raise InfrastructureError(f"no tree from image {image}")
    reason = "" if spec.key != "generic" else (
        f"{row['repo']} version {row.get('version')!r} is not in deepgym's spec table: pytest runs with no "
        "extra arguments in the image's environment")
    if spec.parser != "pytest":
        reason = _unmatched_note(translate_ids(row, spec.parser, tree, origin)) or reason
    return ImportedRow(origin.instance_id, "imported", spec.key, reason, image=image)


#: An instance id that may go into an image name (``owner__name-1234``): no ``/`` or ``:``, which
#: would make the local name a registry host or another tag.
_IMAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class InstanceImages:
    """The SWE-bench instance images on the docker engine, found by instance id (``--images``);
    with ``pull``, a missing one is pulled under its published name first."""

    def __init__(self, pull: bool = False) -> None:
        self.pull, self.client, self.unavailable = pull, None, ""
        self.pull_failed: dict[str, str] = {}
        try:
            self.client = engine()
        except SandboxUnavailable as exc:
            self.unavailable = str(exc)

    def find(self, instance_id: str) -> str | None:
        """The first of :func:`swebench_image_names` the engine has, or None."""
        if self.client is None or not _IMAGE_ID.fullmatch(instance_id):
            return None
        import docker.errors

        names = swebench_image_names(instance_id)
        try:
            for name in names:
                try:
                    self.client.images.get(name)
                    return name
                except docker.errors.ImageNotFound:
                    continue
            if not self.pull:
                return None
        except docker.errors.DockerException as exc:
            raise InfrastructureError(f"docker engine: {exc}") from None
        try:
            self.client.images.pull(names[-1])
        except docker.errors.DockerException as exc:  # no such image, no network: the row falls back
            self.pull_failed[instance_id] = str(exc)
            return None
        return names[-1]

    def missing(self, instance_id: str) -> str:
        """Why ``instance_id`` has no image, and the fix."""
        or_repos = "or pass --repos MIRRORS to import it from a mirror of its repository"
        if self.client is None:
            return f"{self.unavailable} ({or_repos})"
        if not _IMAGE_ID.fullmatch(instance_id):
            return (f"instance_id {instance_id!r} cannot name an image (only letters, digits, '.', '_' and '-'): "
                    "pass --repos MIRRORS to import it from a mirror of its repository")
        names = swebench_image_names(instance_id)
        if instance_id in self.pull_failed:
            return f"could not pull {names[-1]}: {self.pull_failed[instance_id]} ({or_repos})"
        return (f"no SWE-bench instance image of {instance_id} on the docker engine (looked for "
                f"{', '.join(names)}): `docker pull {names[-1]}` (or --pull), {or_repos}")


def translate_ids(row: dict[str, Any], parser: str, tree: Path, origin: Origin) -> list[str]:
    """Rewrite ``row``'s FAIL_TO_PASS / PASS_TO_PASS from ``parser``'s ids into pytest node ids
    (:mod:`deepgym_envs.swebench_ids`), keeping the published ones in ``swebench_ids`` (published id
    -> node ids, for the report). Returns the ids that name no test."""
    task = task_from_row(row, path=origin.source, line=None)
    files, paths = test_patch_files(tree, task.test_patch, origin)
    f2p, p2p, mapping, unmatched = translate(parser, task.FAIL_TO_PASS, task.PASS_TO_PASS, files,
                                             lambda p: p in paths)
    row.update(FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, swebench_ids=mapping)
    return unmatched


def test_patch_files(tree: Path, test_patch: str, origin: Origin) -> tuple[dict[str, str], frozenset[str]]:
    """(path -> text of each file the official harness would run, after ``test_patch``; every path
    of the tree after it). The patch is applied to copies of the files it touches in a scratch
    directory: the tree, its index and its object store are untouched (the hidden tests' blobs
    never enter a task's repository)."""
    touched = patch_paths(test_patch)
    with tempfile.TemporaryDirectory(prefix="deepgym-ids-") as scratch:
        base = copy_tracked(tree, touched, Path(scratch))
        try:
            run_git(["apply", "-"], cwd=scratch, input=test_patch,
                    env={"GIT_CEILING_DIRECTORIES": str(Path(scratch).parent), "GIT_DIR": "/nonexistent"})
        except GitError as exc:
            raise TaskFormatError(origin.source, None, "test_patch",
                                  f"does not apply to the base commit: {exc.stderr[:300]}") from None
        after = {p for p in touched if (Path(scratch) / p).is_file()}
        files = {p: (Path(scratch) / p).read_text(encoding="utf-8", errors="replace")
                 for p in files_of_test_patch(test_patch) if p in after}
    return files, frozenset((base - set(touched)) | after)


def _mirror_of(repos: Path | CloneCache | None, repo: str, origin: Origin) -> Path:
    """``repo``'s mirror: cloned from the URL template, or found in the mirrors folder."""
    if repos is None:
        raise TaskFormatError(origin.source, None, "repo", f"no --repos: a SWE-smith row is imported from a mirror "
                              f"of the original repository ({repo})")
    return repos.mirror(repo, origin) if isinstance(repos, CloneCache) else find_mirror(repos, repo)


def find_mirror(repos: Path, repo: str) -> Path:
    """``repos/owner__name`` (or ``.git`` after it); TaskFormatError saying how to make one."""
    name = repo.replace("/", "__")
    for candidate in (repos / name, repos / f"{name}.git"):
        if candidate.is_dir():
            return candidate
    raise TaskFormatError(str(repos), None, "repo",
                          f"no mirror of {repo} at {repos / name}: make one with "
                          f"`git clone --mirror https://github.com/{repo} {repos / name}`")


#: A row's ``repo`` where it goes into a URL: ``owner/name``, neither part read by git as an option
#: (a leading ``-``) nor by a URL or path as a step up (``..``).
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._][A-Za-z0-9._-]*")

#: The transports a clone may use: no ``ext::`` (which runs a command) or ``fd::``.
_CLONE_PROTOCOLS = "file:git:http:https:ssh"


class CloneCache:
    """Mirrors cloned from a URL template (``https://github.com/{repo}.git``) into ``cache``.

    Each repository is cloned once, however many rows (in however many threads) name it: a lock
    per repository, and a clone that failed is that repository's rows' error without a retry. A
    clone already in ``cache`` (an earlier run's) is reused as it is.
    """

    def __init__(self, template: str, cache: Path) -> None:
        self.template, self.cache = template, cache
        self.cloned: list[str] = []
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, str] = {}

    def mirror(self, repo: str, origin: Origin) -> Path:
        """The clone of ``repo`` (the row's, checked to be ``owner/name``), made if missing."""
        if not _REPO_NAME.fullmatch(repo) or ".." in repo or repo.endswith("/."):
            raise TaskFormatError(origin.source, None, "repo", f"{repo!r} is not a repository name (owner/name: "
                                  "letters, digits, '.', '_' and '-', not starting with '-' or holding '..')")
        name = repo.replace("/", "__")
        url = self.template.replace("{repo}", repo)
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name in self._failed:
                raise InfrastructureError(self._failed[name])
            dest = self.cache / name
            if not dest.is_dir():
                try:
                    self._clone(url, dest)
                except InfrastructureError as exc:
                    self._failed[name] = str(exc)
                    raise
                self.cloned.append(repo)
        # owner__name is not one-to-one (a__b/c and a/b__c): a clone of another URL is not this one.
        cloned_from = run_git(["config", "--file", str(dest / "config"), "--get", "remote.origin.url"],
                              check=False).strip()
        if cloned_from != url:
            raise TaskFormatError(origin.source, None, "repo", f"{dest} is a clone of {cloned_from or 'nothing'}, "
                                  f"not of {url}: delete it to clone {repo} there")
        return dest

    def _clone(self, url: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        # The user's ssh command, if any (git_env drops GIT_*); otherwise ssh must not wait for a password.
        env = {"GIT_ALLOW_PROTOCOL": _CLONE_PROTOCOLS,
               "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")}
        try:
            proc = subprocess.run(["git", "clone", "--mirror", "-q", "--", url, str(staging / "mirror")],
                                  capture_output=True, text=True, errors="replace", env={**git_env(), **env})
            if proc.returncode != 0:
                lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
                why = next((ln.removeprefix("fatal: ") for ln in lines if ln.startswith("fatal:")),
                           lines[0] if lines else f"git exited with {proc.returncode}")
                raise InfrastructureError(
                    f"could not clone {url}: {why}; check the row's repo and the URL template, or, on a machine "
                    f"without network, make mirrors elsewhere (`git clone --mirror {url} MIRRORS/{dest.name}`) "
                    "and pass --repos MIRRORS")
            try:
                os.rename(staging / "mirror", dest)
            except OSError:
                if not dest.is_dir():  # another import into this folder won the race: its clone serves
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def fetch_commit(mirror: Path, base_commit: str, dest: Path, origin: Origin) -> bool:
    """Make ``dest`` a repository holding only ``base_commit`` of ``mirror`` (checked out).

    Returns whether the tree has a top-level ``src`` directory. An existing ``dest`` at that
    commit is kept (imports are re-runnable); anything else there is replaced.
    """
    if (dest / ".git").is_dir():
        head = run_git(["rev-parse", "-q", "--verify", "HEAD"], cwd=dest, check=False).strip()
        if head == base_commit:
            return (dest / "src").is_dir()
    gitdir = source_git_dir(mirror, Origin(str(mirror), "repo", origin.instance_id))
    safe = ["-c", "safe.directory=*", "--no-replace-objects", f"--git-dir={gitdir}"]
    env = {"GIT_NO_LAZY_FETCH": "1"}
    sha = run_git([*safe, "rev-parse", "-q", "--verify", "--end-of-options", f"{base_commit}^{{commit}}"],
                  env=env, check=False).strip()
    if not sha:
        raise TaskFormatError(origin.source, None, "base_commit",
                              f"{base_commit!r} is not a commit of the mirror {mirror}: update it "
                              f"(`git -C {mirror} fetch --all`) or check the row")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        tree = staging / "tree"
        init_repo(tree)
        upload_pack = "git -c safe.directory=* -c uploadpack.allowAnySHA1InWant=true upload-pack"
        # file://: git's local shortcut (hard links to the mirror's objects) would ignore --depth.
        try:
            run_git(["-c", "safe.directory=*", "--no-replace-objects", "fetch", "-q", "--no-tags",
                     "--no-write-fetch-head", "--depth=1", "--upload-pack", upload_pack, f"file://{gitdir}", sha],
                    cwd=tree, env=env)
            run_git(["update-ref", "--no-deref", "HEAD", sha], cwd=tree)
            check_commit_size(tree, sha, TreeCaps.from_env(), origin)
            run_git(["reset", "-q", "--hard", "HEAD"], cwd=tree)
        except GitError as exc:
            if _MISSING_OBJECT.search(exc.stderr):
                raise InfrastructureError(incomplete_mirror(mirror, gitdir, base_commit, exc.stderr)) from None
            raise
        escaping = escaping_links(tree)
        if escaping:
            raise TaskFormatError(origin.source, None, "base_commit", f"the base commit holds links leading "
                                  f"outside the tree or into .git: {', '.join(escaping[:5])}")
        seal_object_store(tree)
        if os.path.lexists(dest):
            shutil.rmtree(dest)
        os.rename(tree, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return (dest / "src").is_dir()


#: What git says when a mirror lacks an object the commit needs (a partial or damaged snapshot).
_MISSING_OBJECT = re.compile(r"unable to read [0-9a-f]{7,}|missing (?:blob|tree|commit|object)|bad object|"
                             r"did not send all necessary objects|possible repository corruption|"
                             r"pack-objects died|could not read [0-9a-f]{7,}|is corrupt")


def incomplete_mirror(mirror: Path, gitdir: Path, base_commit: str, stderr: str) -> str:
    """One line: ``mirror`` lacks objects of ``base_commit`` (git's own words cut to the object it
    could not read), and the two commands that complete it."""
    said = next((m.group(0) for m in re.finditer(r"(?:unable to read|missing \w+|bad object|could not read) "
                                                 r"[0-9a-f]{7,}", stderr)), "")
    said = said or next((ln.strip() for ln in stderr.splitlines() if _MISSING_OBJECT.search(ln)), "")
    url = run_git(["config", "--file", str(gitdir / "config"), "--get",
                   "remote.origin.url"], check=False).strip() or \
        f"https://github.com/{mirror.name.removesuffix('.git').replace('__', '/', 1)}"
    return (f"the mirror {mirror} is incomplete: git cannot read every object of {base_commit[:12]} "
            f"({' '.join(said.replace('remote: ', '').split())}); complete it with "
            f"`git -C {mirror} fetch --refetch origin` (git 2.36 or later), or clone it again with "
            f"`git clone --mirror {url} {mirror}` after moving the old one away")
