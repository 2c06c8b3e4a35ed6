"""The error hierarchy.

Three kinds of failure, three treatments (STYLE.md, principle 4):

* configuration mistakes (a bad task file, an unknown backend) raise a :class:`DeepgymError`
  subclass at once, with a message that says what to do;
* agent mistakes (a malformed action, a missing file) never raise out of ``env.step``: they
  become an observation, through :class:`ToolError`;
* infrastructure failures (the sandbox died, the harness timed out) are
  :class:`InfrastructureError`, which grading turns into a ``no_verdict`` verdict.

Everything else is not an error this package raised on purpose. Where the host computes over what
the agent shaped (its tool calls, its workspace, its patch), such an exception is the agent's
doing too (:func:`agent_shaped`): only the harness's own facts mask an episode.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from typing import Iterator


class DeepgymError(Exception):
    """Base class of every error this package raises on purpose."""


class TaskFormatError(DeepgymError):
    """A task file is malformed. Names the file, the line and the field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str) -> None:
        self.path, self.line, self.field = path, line, field
        where = path if line is None else f"{path}:{line}"
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")


class ResultsFormatError(DeepgymError):
    """An evaluation results file is malformed. Names the file and the field."""

    def __init__(self, path: str, field: str | None, message: str) -> None:
        self.path, self.field = path, field
        super().__init__(f"{path}:{f' field {field!r}:' if field else ''} {message}")


class UnknownTaskError(DeepgymError, KeyError):
    """A task id that is not in the task set."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class SandboxUnavailable(DeepgymError):
    """The chosen sandbox backend cannot run on this machine (and says which one can)."""


class InfrastructureError(DeepgymError):
    """The harness itself failed: the result of this run says nothing about the agent."""


class GitError(InfrastructureError):
    """A git command failed; ``stderr`` is what git said (for messages that name their own context)."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


class SandboxError(InfrastructureError):
    """A sandbox operation failed for reasons outside the agent's control."""


class BuildTooLarge(SandboxError):
    """A build step wrote more than its disk cap; says how to raise it. Nothing it wrote is kept."""


class ToolError(DeepgymError):
    """An agent mistake in a tool call; its message is shown to the agent as the observation."""


class ChangeTooLarge(ToolError):
    """The agent's change is past a bound the host diffs and grades it within (bytes, files, time).
    The agent's outcome: an error observation during the episode, ``unresolved`` at its end."""


class AgentShapedCrash(ToolError):
    """The host's own code failed on something the agent shaped (a tree, a file, an argument)."""


#: Errors of the host's own resources, whatever the input: the harness's fact, not the agent's.
_HOST_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


@contextlib.contextmanager
def agent_shaped(what: str) -> Iterator[None]:
    """The one place an unexpected exception over agent-shaped data gets its owner.

    ``DeepgymError`` already says whose it is and passes through. Any other ``Exception`` raised
    while the host processes what the agent shaped (a ``RecursionError`` from a deep tree, an
    ``OverflowError`` from a forged number, ``MemoryError``) is the agent's failure, a
    :class:`AgentShapedCrash`, logged with its traceback for whoever runs the harness: masking it
    would let a policy turn any failing episode into dropped data. The host running out of file
    descriptors is the harness's (:class:`InfrastructureError`).
    """
    try:
        yield
    except DeepgymError:
        raise
    except OSError as exc:
        if exc.errno in _HOST_ERRNOS:
            raise InfrastructureError(f"{what}: the host is out of file descriptors: {exc}") from exc
        _log.warning("%s failed on agent-shaped data", what, exc_info=True)
        raise AgentShapedCrash(f"{what} failed on what the agent made: {_describe(exc)}") from exc
    except Exception as exc:
        _log.warning("%s failed on agent-shaped data", what, exc_info=True)
        raise AgentShapedCrash(f"{what} failed on what the agent made: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:300]}{'...' if len(text) > 300 else ''}" if text else type(exc).__name__


_log = logging.getLogger("deepgym_envs")
