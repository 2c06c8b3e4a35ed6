"""Gymnasium spaces for text environments: any string as an observation, and every action form
``SWEEnv.step`` parses as an action.

Gymnasium's ``Text`` space holds strings over a fixed character set, and its shared-memory
support (what ``AsyncVectorEnv`` uses by default) maps each character through that set: a space
or a newline in an observation was a ``KeyError``. :class:`AnyText` registers its own shared-memory
layout instead (a length, then the code points), and reads it back on every access: Gymnasium
reads ``Text`` shared memory once, into immutable strings, so later observations never showed.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.sharedctypes import SynchronizedArray
from types import ModuleType
from typing import Any

import multiprocessing as mp
import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from deepgym_envs.actions import ToolCall, parse_action
from deepgym_envs.errors import ToolError

MAX_TEXT = 1 << 22
"""4 Mi characters: far above any observation the tools produce."""


class AnyText(Text):
    """A text space that contains every string up to ``max_length`` (Text limits the charset)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class ActionText(AnyText):
    """What ``step`` takes: assistant text (any string, a tool call or not: a malformed one is the
    agent's mistake, answered by an error observation), or a tool call as an OpenAI tool-call
    object, an assistant message with ``tool_calls``, ``{"name", "arguments"}`` or a
    :class:`~deepgym_envs.actions.ToolCall`. ``sample()`` draws text, as ``Text`` does."""

    def contains(self, x: Any) -> bool:
        if isinstance(x, (dict, ToolCall)):
            try:
                parse_action(x)
            except ToolError:
                return False
            return True
        return super().contains(x)


class SharedTexts(Sequence[str]):
    """One string per environment, decoded from shared memory when read, so each access sees what
    the workers wrote last. ``copy.deepcopy`` (what ``AsyncVectorEnv(copy=True)`` hands out) gives
    a plain tuple of strings."""

    def __init__(self, buffer: np.ndarray) -> None:
        self._buffer = buffer  # (n, 1 + max_length) int32: length, then code points

    def __len__(self) -> int:
        return self._buffer.shape[0]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        row = self._buffer[index]
        return row[1:1 + int(row[0])].tobytes().decode("utf-32-le", "surrogatepass")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


def _ints(shared_memory: SynchronizedArray) -> np.ndarray:
    return np.frombuffer(shared_memory.get_obj(), dtype=np.int32)  # type: ignore[call-overload]


@create_shared_memory.register(AnyText)
def _create(space: AnyText, n: int = 1, ctx: ModuleType = mp) -> SynchronizedArray:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@read_from_shared_memory.register(AnyText)
def _read(space: AnyText, shared_memory: SynchronizedArray, n: int = 1) -> SharedTexts:
    return SharedTexts(_ints(shared_memory).reshape((n, space.max_length + 1)))


@write_to_shared_memory.register(AnyText)
def _write(space: AnyText, index: int, value: str, shared_memory: SynchronizedArray) -> None:
    points = np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    if len(points) > space.max_length:
        raise ValueError(f"an observation of {len(points)} characters does not fit the space's {space.max_length}")
    row = _ints(shared_memory)[index * (space.max_length + 1):]
    row[1:1 + len(points)] = points
    row[0] = len(points)
