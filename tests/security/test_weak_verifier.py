"""Issue 11, class I: the weak verifier runs exploit code, so it never runs it unsandboxed.

Before, ``exit_code_verifier`` fell back to the ``local`` backend (no isolation at all) whenever
the namespace probe said no, silently, and ``audit --weak-verifier --llm-url`` then ran an LLM's
exploit patches on the host. The availability probe is the boundary under test here, so the tests
make it say no (it answers from the kernel and installed tools otherwise).
"""

from __future__ import annotations

import argparse

import pytest

from conftest import requires_namespace
from deepgym_envs import docker_engine as docker_backend
from deepgym_envs.audit import weak
from deepgym_envs.audit.cli import add_audit_parser
from deepgym_envs.errors import SandboxUnavailable


@pytest.fixture
def no_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weak, "available", lambda: (False, "probe: no user namespaces here"))


def test_refuses_when_no_isolating_backend_can_run(no_namespace, monkeypatch, toy_task):
    monkeypatch.setattr(docker_backend, "docker_status", lambda image=None: (False, "probe: no engine"))
    with pytest.raises(SandboxUnavailable, match="will not run it unsandboxed"):
        weak.exit_code_verifier(toy_task, "")


def test_uses_docker_rather_than_local(no_namespace, monkeypatch):
    monkeypatch.setattr(docker_backend, "docker_status", lambda image=None: (True, ""))
    assert weak.weak_backend() == "docker"


@pytest.mark.parametrize("backend", ["local", "nonsense"])
def test_an_explicit_unisolated_backend_is_refused(backend, toy_task):
    with pytest.raises(SandboxUnavailable, match="needs a sandbox that isolates"):
        weak.exit_code_verifier(toy_task, "", backend=backend)


def test_cli_refuses_before_running_anything(tmp_path, toy_jsonl):
    parser = argparse.ArgumentParser(prog="deepgym")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["audit", str(toy_jsonl), "--weak-verifier", "--sandbox", "local",
                              "--out", str(tmp_path / "a.json"), "--strategy", "empty_patch"])
    with pytest.raises(SandboxUnavailable):
        args.func(args)
    assert not (tmp_path / "a.json").exists()


@requires_namespace
def test_default_is_the_namespace_sandbox():
    assert weak.weak_backend() == "namespace"
