"""A backend that replays fixed responses: the loop, the trainer plumbing and benchmarks run
without a model.

It works in both modes the loop knows: with a tokenizer it is a token-in/token-out :class:`LLM`
(responses are encoded, logprobs are 0.0); without one it is a :class:`ChatLLM` that answers chat
messages. Response *t* is sent on the episode's turn *t*; past the end of the script it answers
``default`` (a submit call unless told otherwise).

>>> llm = ScriptedLLM(['<tool_call>{"name": "submit", "arguments": {}}</tool_call>'])
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Sequence

from deepgym_agents.base import tool_call
from deepgym_agents.llm import Generation, SamplingParams, per_prompt

Script = Sequence[str] | Callable[[int, str], str]
"""Responses by turn, or ``f(turn, prompt_text) -> response``."""


class ScriptedLLM:
    def __init__(self, script: Script, tokenizer: Any = None, *, model_name: str = "scripted",
                 default: str | None = None, latency: float | tuple[float, float] = 0.0, seed: int = 0) -> None:
        """
        Args:
            script: the responses, by turn, or a function of (turn, prompt text).
            tokenizer: an HF tokenizer: token mode (``generate``); None: chat mode (``chat``).
            default: the answer past the end of a list script (default: a submit call).
            latency: seconds each batched call sleeps, or a (low, high) range drawn per call, so a
                benchmark can stand in for a real engine.
        """
        self.script = script
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.default = tool_call("submit") if default is None else default
        self.latency = latency
        self._rng = random.Random(seed)
        self._seen: dict[int, set[int]] = {}  # length -> hashes of prompt+completion sequences served
        self._lock = threading.Lock()
        self.calls = 0
        self.busy = 0.0
        """Seconds spent inside calls (benchmarks compare it with wall time)."""
        self.weights_version = 0

    # -- token mode ------------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        if self.tokenizer is None:
            raise TypeError("ScriptedLLM without a tokenizer is a chat backend: call chat()")
        started = time.perf_counter()
        out = []
        for prompt, p in zip(prompts, per_prompt(params, len(prompts))):
            text = self._answer(self._turn_of(prompt), lambda: self.tokenizer.decode(prompt))
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
            finish = "stop"
            if len(ids) > p.max_tokens:
                ids, finish = ids[: p.max_tokens], "length"
            elif self.tokenizer.eos_token_id is not None:
                ids.append(self.tokenizer.eos_token_id)  # a real model ends its turn with the eos token
            self._remember(prompt + ids)
            out.append(Generation(ids, [0.0] * len(ids), self.tokenizer.decode(ids, skip_special_tokens=True), finish))
        self._sleep(started)
        return out

    def update_weights(self, state_dict: dict[str, Any]) -> None:
        self.weights_version += 1

    # -- chat mode -------------------------------------------------------------------------------
    def chat(self, conversations: list[list[dict[str, Any]]], tools: list[dict[str, Any]] | None,
             params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        started = time.perf_counter()
        out = []
        for messages in conversations:
            turn = sum(m.get("role") == "assistant" for m in messages)
            text = self._answer(turn, lambda: "\n".join(str(m.get("content") or "") for m in messages))
            out.append(Generation([], [], text, "stop", message={"role": "assistant", "content": text}))
        self._sleep(started)
        return out

    # -- helpers ---------------------------------------------------------------------------------
    def _answer(self, turn: int, prompt_text: Callable[[], str]) -> str:
        if callable(self.script):
            return self.script(turn, prompt_text())
        return self.script[turn] if turn < len(self.script) else self.default

    def _turn_of(self, prompt: list[int]) -> int:
        """How many earlier turns of this episode were served: served sequences that prefix it."""
        with self._lock:
            return sum(hash(tuple(prompt[:n])) in hashes for n, hashes in self._seen.items() if n <= len(prompt))

    def _remember(self, sequence: list[int]) -> None:
        with self._lock:
            self._seen.setdefault(len(sequence), set()).add(hash(tuple(sequence)))

    def _sleep(self, started: float) -> None:
        delay = self._rng.uniform(*self.latency) if isinstance(self.latency, tuple) else self.latency
        if delay > 0:
            time.sleep(delay)
        self.calls += 1
        self.busy += time.perf_counter() - started
