"""Class G (masking by message text): only facts the agent cannot write turn a verdict into no_verdict.

``no_verdict`` drops a rollout from training, so a policy that can reach it at will turns any 0 into
"no data". Grading used to decide it from ``"No space left on device" in str(exc)``, text that
echoes the file names of the agent's own patch. Now a patch that does not apply, or does not fit
the sandbox's disk cap, is the agent's: ``unresolved``. Only a host short of disk space (a fact
measured by the harness) masks the verdict.
"""

from __future__ import annotations

import pytest

import deepgym_envs.grading as grading
from deepgym_envs import grade
from deepgym_envs.sandbox import SandboxLimits
from tests.conftest import requires_namespace
from tests.security.test_forgery import grading_backend  # noqa: F401 (a fixture)

NAME = "No space left on device.py"
#: Edits a file that does not exist: git apply fails, and its message quotes the name.
NOT_APPLYING = (f'diff --git "a/{NAME}" "b/{NAME}"\n--- "a/{NAME}"\n+++ "b/{NAME}"\n@@ -1 +1 @@\n-a\n+b\n')


def big_file(path: str, lines: int, width: int = 1000) -> str:
    body = "".join(f"+{'x' * width}\n" for _ in range(lines))
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{lines} @@\n{body}")


def test_a_file_name_quoting_the_disk_full_message_does_not_mask(toy_task, grading_backend):
    v = grade(toy_task, NOT_APPLYING, backend=grading_backend)
    assert v.status == "unresolved" and not v.masked, v.reason
    assert "No space left on device" in v.reason  # the message did say it: the status does not follow it


@requires_namespace
@pytest.mark.slow
def test_a_patch_over_the_sandboxs_disk_cap_is_the_agents_fault(toy_task):
    limits = SandboxLimits(disk_bytes=4 << 20)
    v = grade(toy_task, toy_task.patch + big_file("data/blob.txt", 6000), limits=limits)
    assert v.status == "unresolved" and not v.masked, v.reason


@requires_namespace
@pytest.mark.slow
def test_a_patch_that_leaves_no_room_for_the_hidden_tests_is_the_agents_fault(toy_task):
    """Exactly the cap (4 MiB of 1 KiB lines): the patch applies, the hidden test patch cannot be
    written. That was "hidden test patch does not apply", a harness failure, so masked."""
    limits = SandboxLimits(disk_bytes=4 << 20)
    v = grade(toy_task, big_file("data/blob.txt", 4096, 1023), limits=limits)
    assert v.status == "unresolved" and not v.masked, v.reason


@requires_namespace
def test_a_host_short_of_disk_space_masks(toy_task, monkeypatch):
    """The one fact that does mask: the host filesystem holding sandboxes is (nearly) full."""
    monkeypatch.setattr(grading, "HOST_FREE_FLOOR", 1 << 62)
    v = grade(toy_task, NOT_APPLYING)
    assert v.status == "no_verdict" and v.masked, v.reason
