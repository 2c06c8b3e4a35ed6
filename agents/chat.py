"""Chat templating with token ids built incrementally from what the engine produced.

The prompt for turn *t+1* is the prompt for turn *t*, then the ids the engine sampled, then the
ids of what the template adds after them (end of the assistant message, the tool message, the next
assistant header). Only that last piece is tokenised; the sampled ids are never re-tokenised.

The delta comes from rendering the conversation with the tokenizer's own template twice, before
and after the new messages, and taking the difference. That needs a *prefix-stable* template (the
rendering of a conversation starts with the rendering of every prefix of it). Some templates are
not (Qwen3's drops earlier turns' reasoning); for those the delta is rendered from the new messages
alone, after a fixed stand-in history, and the episode is marked so the difference to a
whole-conversation rendering is visible (:meth:`ChatFormatter.matches_template`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The stand-in history used to render a delta for a template that is not prefix-stable.
_STANDIN = [{"role": "user", "content": "."}]


@dataclass
class Delta:
    ids: list[int]
    prefix_stable: bool
    """False when the template re-rendered earlier messages differently (the fallback was used)."""


class ChatFormatter:
    """Renders conversations with ``tokenizer.apply_chat_template`` (tools included)."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None) -> None:
        self.tokenizer = tokenizer
        self.tools = tools or None

    def render(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=self.tools, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The whole first prompt, ending with the assistant header."""
        return self.encode(self.render(messages, generation_prompt=True))

    def delta_after(self, history: list[dict[str, Any]], completion_ids: list[int], assistant: dict[str, Any],
                    new: list[dict[str, Any]], *, generation_prompt: bool) -> Delta:
        """Ids that follow ``completion_ids``: the rest of the assistant message, then ``new``.

        ``history`` ends where the completion's prompt ended (before ``assistant``).
        """
        before = self.render(history, generation_prompt=True)
        with_assistant = self.render(history + [assistant], generation_prompt=False)
        after = self.render(history + [assistant] + new, generation_prompt=generation_prompt)
        stable = with_assistant.startswith(before) and after.startswith(with_assistant)
        if not stable:
            history = _STANDIN
            before = self.render(history, generation_prompt=True)
            with_assistant = self.render(history + [assistant], generation_prompt=False)
            after = self.render(history + [assistant] + new, generation_prompt=generation_prompt)
        tail = self._assistant_tail(with_assistant[len(before):] if with_assistant.startswith(before) else "",
                                    completion_ids)
        return Delta(self.encode(tail + after[len(with_assistant):]), stable)

    def _assistant_tail(self, rendered_assistant: str, completion_ids: list[int]) -> str:
        """What the template writes after the sampled text: usually the end-of-turn token and a
        newline, or just the newline when the model emitted the end-of-turn token itself."""
        produced = self.tokenizer.decode(completion_ids, skip_special_tokens=False)
        if rendered_assistant.startswith(produced):
            return rendered_assistant[len(produced):]
        # The template rewrote the content (stripped it, reformatted a tool call): close the turn
        # the way the template ends messages, after the ids the model actually produced.
        eos = self.tokenizer.eos_token or ""
        closing = rendered_assistant[rendered_assistant.rfind(eos):] if eos and eos in rendered_assistant else ""
        if produced.endswith(eos) and closing.startswith(eos):
            closing = closing[len(eos):]
        return closing

    def matches_template(self, ids: list[int], messages: list[dict[str, Any]], *, generation_prompt: bool) -> bool:
        """Do the incrementally built ids equal the template rendering of the whole conversation?"""
        return ids == self.encode(self.render(messages, generation_prompt=generation_prompt))


def assistant_message(text: str, message: dict[str, Any] | None = None) -> dict[str, Any]:
    """The assistant message for the history: the server's own (content and ``tool_calls``, kept
    as sent so it can be sent back) when there is one, else the sampled text as content."""
    if message is None:
        return {"role": "assistant", "content": text}
    msg: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        msg["tool_calls"] = message["tool_calls"]
    return msg
