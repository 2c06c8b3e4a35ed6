"""Nothing of the host reaches a sandbox: its environment, its paths, its credentials.

Before the fix, bubblewrap (PID 1 of every namespace sandbox, agent's or grading view's) was
started with the host's whole environment: ``--clearenv`` applies to its child only, so
``/proc/1/environ`` showed every variable the trainer was started with (an API key, a token), and
``/proc/1/cmdline`` named every host bind path. The host's pip configuration (``/etc/pip.conf``,
``/etc/xdg/pip``: index URLs with tokens, constraint files) was hidden from build steps only; a
home directory under a bound system directory showed its ``.netrc``, ``.aws``, ``.ssh``...

The canary is set in this process's environment and planted in every credential file a sandbox
could see; no process readable inside may show it, in any backend that promises isolation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings

import pytest

from deepgym_envs import load_tasks, run_batch
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import patch_paths
from deepgym_envs.trees import pristine_tree
from tests.conftest import require_docker, requires_namespace

CANARY = "deepgym-canary-" + "5ecret-0f-the-h0st"
CANARY_VAR = "DEEPGYM_CANARY_SECRET"
LIMITS = SandboxLimits(timeout=60)

#: Every process the command can see: its environment and command line, and its own ``env``.
SCAN_PROCS = "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done; env"

#: Credential and index configuration files, relative to a home directory.
HOME_FILES = (".netrc", ".pypirc", ".git-credentials", ".gitconfig", ".docker/config.json", ".aws/credentials",
              ".config/gcloud/application_default_credentials.json", ".ssh/id_ed25519", ".huggingface/token",
              ".cache/huggingface/token", ".kube/config", ".config/pip/pip.conf", ".pip/pip.conf",
              ".config/gh/hosts.yml")


@pytest.fixture
def canary_env(monkeypatch):
    monkeypatch.setenv(CANARY_VAR, CANARY)


@pytest.fixture
def planted_home(monkeypatch, canary_env):
    """A home directory under ``/opt`` (a system directory every namespace sandbox binds, where
    service accounts' homes can live), readable by anyone, holding the canary in every credential
    file; the user's pip configuration names a constraint file and a client certificate beside it,
    and ``PIP_CONFIG_FILE`` one more file there."""
    if not os.access("/opt", os.W_OK):
        pytest.skip("needs a writable /opt (a directory the namespace sandbox binds)")
    home = tempfile.mkdtemp(prefix="deepgym-home-", dir="/opt")
    try:
        os.chmod(home, 0o755)
        files = [os.path.join(home, rel) for rel in HOME_FILES]
        extra = {"constraints.txt": f"# {CANARY}\n", "client.pem": f"{CANARY}\n",
                 "custom/pip.conf": f"[global]\nindex-url = https://user:{CANARY}@example.invalid/simple\n"}
        pip_conf = (f"[global]\nindex-url = https://user:{CANARY}@example.invalid/simple\n"
                    f"constraint = {home}/constraints.txt\nclient-cert = {home}/client.pem\n")
        for path in files:
            _write(path, pip_conf if path.endswith("pip.conf") else f"{CANARY}\n", home)
        for rel, text in extra.items():
            _write(os.path.join(home, rel), text, home)
        monkeypatch.setenv("HOME", home)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.path.join(home, "custom/pip.conf"))
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        yield home, [*files, *(os.path.join(home, rel) for rel in extra)]
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _write(path: str, text: str, home: str) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    while parent != home:  # world-readable all the way, as a careless home directory is
        os.chmod(parent, 0o755)
        parent = os.path.dirname(parent)
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o644)


def _system_pip_config() -> dict[str, str]:
    """This host's own site-wide pip, git, npm, uv, conda and apt configuration files that hold
    something (none is written here): each may name an index with a token or a credential helper."""
    from deepgym_envs.sandbox.hidden import SYSTEM_SECRETS

    found = {}
    system = [p for p in SYSTEM_SECRETS if os.path.isfile(p)]
    system += [os.path.join(d, n) for d in SYSTEM_SECRETS if os.path.isdir(d) for n in _listdir(d)]
    for path in ("/etc/pip.conf", *(os.path.join("/etc/xdg/pip", n) for n in _listdir("/etc/xdg/pip")), *system):
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text:
            found[path] = text
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _host_temp_paths() -> tuple[str, ...]:
    """Prefixes of deepgym's host-side scratch directories (a sandbox's, the support files', the stager's)."""
    tmp = tempfile.gettempdir()
    return tuple(os.path.join(tmp, f"deepgym-{kind}-") for kind in ("ns", "support", "stage", "build", "docker"))


def _assert_sealed_off(sb, files: list[str] = ()) -> None:
    seen = sb.exec(["sh", "-c", SCAN_PROCS], timeout=60)
    assert seen.exit_code == 0, seen.output
    assert CANARY not in seen.output, "a host environment variable is readable inside"
    cmdline = sb.exec(["cat", "/proc/1/cmdline"], timeout=60).stdout
    assert not [p for p in _host_temp_paths() if p in cmdline], cmdline.replace("\0", " ")
    if files:
        read = sb.exec(["sh", "-c", 'for f in "$@"; do cat "$f" 2>/dev/null; done', "sh", *files], timeout=60)
        assert CANARY not in read.output, "a credential file of the host is readable inside"
    system = _system_pip_config()
    if system:
        read = sb.exec(["cat", *system], timeout=60).stdout
        leaked = [path for path, text in system.items() if text in read]
        assert not leaked, f"the host's pip configuration is readable inside: {leaked}"


@pytest.fixture
def task():
    return load_tasks("builtin")[0]


@requires_namespace
def test_namespace_sandbox_shows_no_host_variable_path_or_credential(task, planted_home):
    _, files = planted_home
    with make_sandbox(pristine_tree(task), "namespace", LIMITS) as sb:
        _assert_sealed_off(sb, files)
        sb.reset()  # a new holder, the same promise
        _assert_sealed_off(sb, files)


@requires_namespace
def test_grading_view_shows_no_host_variable_path_or_credential(task, planted_home):
    _, files = planted_home
    with ViewPool() as pool:
        with pool.view(pristine_tree(task), "namespace", LIMITS) as sb:
            _assert_sealed_off(sb, files)
        with pool.view(pristine_tree(task), "namespace", LIMITS) as sb:  # renewed, not new
            _assert_sealed_off(sb, files)


#: Appended to the module under test: at import inside the grading run (the warm test server's
#: own sandbox included) it breaks the gold fix if any host secret is readable.
GRADING_PROBE = '''
def _deepgym_host_probe(needle, files):
    import glob
    seen = b""
    for path in [*glob.glob("/proc/[0-9]*/environ"), *glob.glob("/proc/[0-9]*/cmdline"), *files]:
        try:
            with open(path, "rb") as fh:
                seen += fh.read()
        except OSError:
            pass
    if needle.encode() in seen:
        raise RuntimeError("a host secret is readable in the grading run")


_deepgym_host_probe({needle!r}, {files!r})
'''


@requires_namespace
@pytest.mark.slow
def test_a_grading_run_sees_no_host_secret(task, planted_home):
    """The gold fix, plus code that fails it if a host secret is readable from the tests' process."""
    _, files = planted_home
    module = next(p for p in patch_paths(task.patch) if p.endswith(".py"))
    # Split so that the probe's own source never holds the canary whole.
    needle_code = GRADING_PROBE.format(needle="@@", files=files).replace("'@@'", f"{CANARY[:8]!r} + {CANARY[8:]!r}")
    with make_sandbox(pristine_tree(task), "namespace") as sb:
        sb.apply_patch(task.patch)
        sb.write_file(module, sb.read_file(module) + b"\n" + needle_code.encode())
        candidate = sb.diff()
    verdicts = run_batch(task, [candidate, candidate], workers=1, warm=True, backend="namespace")
    assert [v.status for v in verdicts] == ["resolved", "resolved"], [v.reason for v in verdicts]


@pytest.mark.docker
def test_docker_sandbox_shows_no_host_variable_or_path(task, canary_env):
    """The container's environment is the image's and ours; nothing the engine knows of the host."""
    require_docker()
    with make_sandbox(pristine_tree(task), "docker", LIMITS) as sb:
        _assert_sealed_off(sb)


def test_local_sandbox_commands_start_from_a_scrubbed_environment(task, canary_env):
    """The local backend isolates nothing: a command runs as this user and can read this user's
    files and ``/proc/<pid>/environ`` of this user's processes. What it promises is only that the
    command itself, and the launcher it is started by, hold none of the host's variables."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with make_sandbox(pristine_tree(task), "local", LIMITS) as sb:
            seen = sb.exec(["sh", "-c", "cat /proc/self/environ; echo; env"], timeout=60)
    assert seen.exit_code == 0, seen.output
    assert CANARY not in seen.output


def test_docker_hides_the_pip_configuration_of_a_bound_python(tmp_path, canary_env):
    """A task's Python environment is bound into the container at its host path: a ``pip.conf``
    in its prefix (where pip reads one) is covered by an empty file."""
    pytest.importorskip("docker")
    from deepgym_envs.sandbox.docker_pyenv import python_env_mounts

    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "pip.conf").write_text(f"[global]\nindex-url = https://user:{CANARY}@example.invalid/simple\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    over = {m["Target"]: m["Source"] for m in python_env_mounts([str(prefix)], str(scratch))}
    hidden = over.get(str(prefix / "pip.conf"))
    assert hidden is not None and os.path.getsize(hidden) == 0, over


@requires_namespace
@pytest.mark.skipif(os.geteuid() != 0, reason="plants files under /etc")
@pytest.mark.parametrize("path", ["/etc/gitconfig", "/etc/npmrc", "/etc/uv/uv.toml", "/etc/apt/auth.conf"])
def test_system_wide_credentials_read_as_empty(task, path):
    """git's, npm's, uv's and apt's system configuration was readable in every namespace sandbox
    (an ``http.extraHeader`` token, an ``_authToken``, index credentials): /etc is bound whole."""
    planted = not os.path.exists(path)
    original = None if planted else open(path, "rb").read()
    folder = os.path.dirname(path)
    made = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    try:
        with open(path, "a") as fh:
            fh.write(f"\n# {CANARY}\n")
        with make_sandbox(pristine_tree(task), "namespace", LIMITS) as sb:
            seen = sb.exec(["cat", path], timeout=60)
            assert CANARY not in seen.output, f"{path} is readable inside"
    finally:
        if planted:
            os.unlink(path)
            if made:
                os.rmdir(folder)
        else:
            with open(path, "wb") as fh:
                fh.write(original)
