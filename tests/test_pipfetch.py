"""Fetching apart from building (deepgym_envs/sandbox/pipfetch.py): what a build needs reaches it.

Packages come from a local ``--find-links`` directory (the ``wheelhouse`` fixture), no index.
"""

from __future__ import annotations

import pytest

from deepgym_envs.pyenv import PythonEnv, ensure_env
from deepgym_envs.sandbox.pipfetch import missing_requirements, requirement_names
from tests.conftest import requires_namespace
from tests.security.test_untrusted_builds import _project, _sdist, attack, wheelhouse, write_wheel  # noqa: F401


@pytest.mark.parametrize("args, names", [
    (["--prefer-binary", "attrs==23.2.0", "-r", "req.txt", "./src[test]"], ["attrs==23.2.0"]),
    (["pytest", "/abs/path", "x @ https://e.org/x.tar.gz", "--find-links", "y==1", "-c", "c.txt"], ["pytest"]),
    (["a[b]>=1,<2", "../up", "C:\\\\x", "--index-url", "https://i/simple", "ok"], ["a[b]>=1,<2", "ok"]),
])
def test_only_plain_requirements_are_ever_handed_to_a_fetch_step(args, names):
    assert requirement_names(args) == names


@pytest.mark.slow
@requires_namespace
def test_a_dependency_only_an_sdists_build_reveals_is_fetched_in_another_round(tmp_path, attack, wheelhouse):
    """The row names only the sdist; its metadata (known once its backend ran, offline) needs a
    wheel no fetch step was asked for: the build reports it missing, a fetch step gets it."""
    marker, secret = attack
    write_wheel(str(wheelhouse), "depwheel", "2.0", {"depwheel/__init__.py": "VALUE = 2\n"})
    _sdist(wheelhouse, "topsd", "1.0", _project("topsd", "1.0", marker, secret, requires=("depwheel==2.0",)))
    prefix = ensure_env(PythonEnv.from_dict({"requirements": ["topsd==1.0"]}))
    assert prefix is not None
    site = next(prefix.glob("lib/python*/site-packages"))
    assert (site / "depwheel" / "__init__.py").read_text() == "VALUE = 2\n"
    assert (site / "topsd").is_dir()
    assert not marker.exists()


def test_a_missing_requirement_is_named_without_its_marker():
    # markdown 3.6 gave no tasks: its [testing] extra's dependency came back with its marker.
    out = ('ERROR: Could not find a version that satisfies the requirement coverage; extra == "testing" '
           '(from markdown[testing]) (from versions: none)\n'
           'ERROR: No matching distribution found for coverage; extra == "testing"\n'
           'ERROR: No matching distribution found for attrs>=19.2\n')
    assert missing_requirements(out) == ["coverage", "attrs>=19.2"]
    assert requirement_names(missing_requirements(out)) == ["coverage", "attrs>=19.2"]


@pytest.mark.slow
@requires_namespace
def test_an_extras_dependency_only_a_build_reveals_is_fetched(tmp_path, attack, wheelhouse):
    """pip names a dependency that comes with an extra together with its marker; it is still fetched."""
    marker, secret = attack
    write_wheel(str(wheelhouse), "depwheel", "2.0", {"depwheel/__init__.py": "VALUE = 2\n"})
    extra = 'depwheel==2.0; extra == "test"\nProvides-Extra: test'  # two metadata lines
    _sdist(wheelhouse, "topsd", "1.0", _project("topsd", "1.0", marker, secret, requires=(extra,)))
    prefix = ensure_env(PythonEnv.from_dict({"requirements": ["topsd[test]==1.0"]}))
    assert prefix is not None
    site = next(prefix.glob("lib/python*/site-packages"))
    assert (site / "depwheel" / "__init__.py").read_text() == "VALUE = 2\n"


def test_the_pins_a_requirements_file_lists_are_read_for_the_first_fetch(tmp_path):
    from deepgym_envs.sandbox.pipfetch import listed_requirements

    req = tmp_path / "requirements-tests39.txt"
    req.write_text("# pinned\nattrs==23.1.0\n    # via pytest\ncoverage==7.3.2  # via pytest-cov\n"
                   "-r other.txt\n--hash=sha256:00\nhypothesis==6.0 \\\n    --hash=sha256:ab\n"
                   "typing-extensions==4.8.0; python_version < '3.12'\n./local\nhttps://e.org/x.tar.gz\n")
    assert listed_requirements(["--prefer-binary", "-r", str(req)]) == [
        "attrs==23.1.0", "coverage==7.3.2", "hypothesis==6.0", "typing-extensions==4.8.0; python_version < '3.12'"]
    assert listed_requirements([f"-r{req}", f"--requirement={req}"]) == listed_requirements(["-r", str(req)]) * 2
    # A path through a link is not read: the project's files are untrusted.
    (tmp_path / "linked").symlink_to(tmp_path)
    assert listed_requirements(["-r", str(tmp_path / "linked" / req.name)]) == []
    (tmp_path / "direct.txt").symlink_to(req)
    assert listed_requirements(["-r", str(tmp_path / "direct.txt")]) == []


@pytest.mark.slow
@requires_namespace
def test_a_long_requirements_file_installs_without_a_round_per_pin(tmp_path, wheelhouse, monkeypatch):
    """wcwidth 0.2.13's requirements-tests39.txt pins 34 distributions; the build found one missing
    per round and gave up after MAX_ROUNDS. Here one round must do for three."""
    from deepgym_envs.pyenv import make_venv, pip_freeze, pip_install
    from deepgym_envs.sandbox import pipfetch
    from deepgym_envs.sandbox.build import BuildSandbox

    monkeypatch.setattr(pipfetch, "MAX_ROUNDS", 1)
    for name in ("alpha", "beta", "gamma"):
        write_wheel(str(wheelhouse), name, "1.0", {f"{name}/__init__.py": f"NAME = {name!r}\n"})
    work = tmp_path / "work"
    work.mkdir()
    (work / "req.txt").write_text("alpha==1.0\nbeta==1.0  # via alpha\ngamma==1.0\n")
    with BuildSandbox(scratch=[str(work)]) as sb:
        make_venv(sb, str(work / "venv"))
        pip_install(sb, str(work / "venv"), ["-r", str(work / "req.txt")])
        assert set(pip_freeze(sb, str(work / "venv"))) >= {"alpha==1.0", "beta==1.0", "gamma==1.0"}
