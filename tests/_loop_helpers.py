"""Shared pieces of the agent-loop tests: a tiny model, a recording backend, chat completions."""

from __future__ import annotations

import threading
from typing import Any

from deepgym_agents.base import tool_call
from conftest import NAMESPACE_OK

SANDBOX = "namespace" if NAMESPACE_OK else "local"

#: The toy task's fix, as the tool calls an agent would make.
FIX_CALLS = [
    ("edit", {"command": "str_replace", "path": "src/calc/ops.py", "old_str": "return max(lo, x)",
              "new_str": "return max(lo, min(x, hi))"}),
    ("submit", {}),
]
FIX_SCRIPT = [tool_call(name, **args) for name, args in FIX_CALLS]


class Recording:
    """Wraps a token backend and keeps every (prompt, generation) pair it served."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.tokenizer = llm.tokenizer
        self.model_name = llm.model_name
        self.calls: list[tuple[list[int], Any]] = []
        self.batch_sizes: list[int] = []
        self._lock = threading.Lock()

    def generate(self, prompts: list[list[int]], params: Any) -> list[Any]:
        gens = self.llm.generate(prompts, params)
        with self._lock:
            self.calls += [(list(p), g) for p, g in zip(prompts, gens)]
            self.batch_sizes.append(len(prompts))
        return gens

    def update_weights(self, state_dict: Any) -> None:
        self.llm.update_weights(state_dict)


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message,
            "finish_reason": finish, **extra}], "usage": {"completion_tokens": 7}}
