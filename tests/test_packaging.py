"""The wheel as users install it: beside the OpenAI Agents SDK (whose import name is ``agents``), and
with the reference agents reaching the ``deepgym`` command through entry points only."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not (REPO / "pyproject.toml").is_file(),
                                reason="needs the source checkout to build the wheel from")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)])
    assert r.returncode == 0, r.stderr
    (built,) = out.glob("deepgym_envs-*.whl")
    return built


def test_the_wheel_installs_no_top_level_agents_package(wheel):
    import zipfile

    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert "agents" not in tops
    assert {"deepgym_envs", "deepgym_agents"} <= tops


@pytest.mark.slow
def test_the_wheel_and_openai_agents_import_side_by_side(wheel, tmp_path):
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    py = str(env / "bin" / "python")
    r = _run([py, "-m", "pip", "install", "-q", str(wheel), "openai-agents"])
    if r.returncode != 0 and "No matching distribution" in r.stderr:
        pytest.skip(f"no package index reachable for openai-agents: {r.stderr.strip()[-300:]}")
    assert r.returncode == 0, r.stderr
    probe = ("import agents, deepgym_agents, deepgym_envs\n"
             "from agents import Agent, Runner\n"  # the SDK's own names: its package was not shadowed
             "from deepgym_agents import make_agent\n"
             "assert 'site-packages' in deepgym_agents.__file__, deepgym_agents.__file__\n"
             "print(agents.__file__)\n")
    r = _run([py, "-c", probe], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "site-packages/agents/" in r.stdout
    # The core finds the reference agents through the installed entry points, not an import of its own.
    r = _run([str(env / "bin" / "deepgym"), "eval", "--agent", "nobody"], cwd=tmp_path)
    assert r.returncode == 2
    assert "oracle, noop, openai, vllm, hf" in r.stdout
    r = _run([str(env / "bin" / "deepgym-envs"), "train", "--help"], cwd=tmp_path)
    assert r.returncode == 0 and "--online" in r.stdout, r.stderr
