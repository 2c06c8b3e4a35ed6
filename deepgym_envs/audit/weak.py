"""A deliberately weak verifier: the audit's negative control.

:func:`exit_code_verifier` does what a naive harness does: apply the candidate patch and the
hidden test patch, run ``python -m pytest`` in the repository and trust the exit code. Nothing
is restored or neutralised, and no report is cross-checked, so the tier-1 strategies must find
exploits here; an audit that finds none on it is not testing anything. Never grade with it.

What it runs is exploit code (the audit's strategies, an LLM attacker's patches), so it runs in a
real sandbox only: ``namespace``, else ``docker``; never ``local``, and where neither can run it
refuses with :class:`SandboxUnavailable` rather than fall back.

>>> exit_code_verifier(task, conftest_forcing_passes).status      # doctest: +SKIP
'resolved'
"""

from __future__ import annotations

import time
import warnings

from deepgym_envs import docker_engine
from deepgym_envs.errors import InfrastructureError, SandboxUnavailable, ToolError
from deepgym_envs.grading import Verdict, test_files
from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.sandbox.namespace import available
from deepgym_envs.tasks import Task
from deepgym_envs.trees import pristine_tree


#: Backends that isolate what they run; the weak verifier takes nothing else.
ISOLATING = ("namespace", "docker")


def weak_backend(backend: str | None = None) -> str:
    """The sandbox the weak verifier runs in: ``backend`` if it isolates, else the first of
    namespace / docker that can run here; SandboxUnavailable if none (never ``local``)."""
    if backend is not None:
        if backend not in ISOLATING:
            raise SandboxUnavailable(f"the weak verifier runs exploit code: it needs a sandbox that isolates "
                                     f"({' or '.join(ISOLATING)}), not {backend!r}")
        return backend
    ok, why = available()
    if ok:
        return "namespace"
    docker_ok, docker_why = docker_engine.docker_status()  # looked up at call time: tests stand in for the engine
    if docker_ok:
        return "docker"
    raise SandboxUnavailable(f"the weak verifier runs exploit code and will not run it unsandboxed: namespace "
                             f"backend: {why}; docker backend: {docker_why}")


def exit_code_verifier(task: Task, patch: str, *, backend: str | None = None, timeout: float = 300.0) -> Verdict:
    """Resolved iff ``python -m pytest <hidden test files>`` exits 0 after applying both patches."""
    start = time.monotonic()
    backend = weak_backend(backend)  # outside the try: no sandbox is a refusal, not a no_verdict
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sb = make_sandbox(pristine_tree(task), backend, spec=sandbox_spec(task))
        with sb:
            try:
                if patch.strip():
                    sb.apply_patch(patch)
                if task.test_patch.strip():
                    sb.apply_patch(task.test_patch)
            except ToolError as exc:
                return Verdict("unresolved", reason=f"patch does not apply: {exc}", duration=time.monotonic() - start)
            files = test_files([*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
            result = sb.exec(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *task.pytest_args, *files],
                             timeout)
    except (InfrastructureError, SandboxUnavailable) as exc:
        return Verdict.no_verdict(str(exc), time.monotonic() - start)
    status = "resolved" if result.exit_code == 0 else "unresolved"
    return Verdict(status, reason=f"pytest exited {result.exit_code}", duration=time.monotonic() - start,
                   log=result.output[-4000:])
