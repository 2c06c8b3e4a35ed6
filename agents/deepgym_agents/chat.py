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

Text from the environment (every message that is not the assistant's: the task's statement, tool
output) cannot forge the template's structure. The rendered text is tokenised as a whole, so a
special-token string inside it (``<|im_end|>`` then ``<|im_start|>assistant`` in a file the agent
printed) would become the special ids of a real turn. Before rendering, every added-token string in
that text gets a zero-width space (U+200B) after its first character: the model reads the same
characters plus an invisible one, the tokenizer finds no special token. The messages kept in the
trajectory are the environment's own text; only the ids carry the zero-width spaces. As a check
that holds even where a tokenizer's normaliser would undo that, each prompt's special ids are
compared with those of the same conversation with the environment's text replaced by a stand-in:
any extra is counted in :attr:`Delta.env_special_ids` (the loop records it as
``metadata["observation_special_ids"]`` and the episode's ``template_match`` is then false).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The stand-in history used to render a delta for a template that is not prefix-stable.
_STANDIN = [{"role": "user", "content": "."}]
#: Splits a special-token string in the environment's text so it stays text (see the module docstring).
ZERO_WIDTH_SPACE = "\u200b"
#: What the environment's text becomes in the rendering that counts the template's own special ids.
_BLANK = "."


@dataclass
class Delta:
    ids: list[int]
    prefix_stable: bool
    """False when the template re-rendered earlier messages differently (the fallback was used)."""
    env_special_ids: int = 0
    """Special-token ids beyond the template's own: text from the environment that became one."""


class ChatFormatter:
    """Renders conversations with ``tokenizer.apply_chat_template`` (tools included)."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None) -> None:
        self.tokenizer = tokenizer
        self.tools = tools or None
        # Added tokens are matched in raw text by the tokenizer, special or not (Qwen's <tool_call>).
        added = dict(tokenizer.get_added_vocab()) if hasattr(tokenizer, "get_added_vocab") else {}
        added.update(zip(tokenizer.all_special_tokens, tokenizer.all_special_ids))
        self._special_ids = frozenset(added.values())
        self._special_strings = sorted((t for t in added if len(t) > 1), key=len, reverse=True)

    def render(self, messages: list[dict[str, Any]], *, generation_prompt: bool, blank: bool = False) -> str:
        """The template's text, the environment's text neutralised (``blank``: replaced by a stand-in)."""
        messages = [m if m.get("role") == "assistant" else self._from_env(m, blank) for m in messages]
        return self.tokenizer.apply_chat_template(messages, tools=self.tools, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def neutralise(self, text: str) -> str:
        """``text`` with every added-token string split by a zero-width space after its first character."""
        for token in self._special_strings:
            split = token[0] + ZERO_WIDTH_SPACE + token[1:]
            while token in text:  # overlapping occurrences ("aaa" holds "aa" twice) need another pass
                text = text.replace(token, split)
        return text

    def prompt(self, messages: list[dict[str, Any]]) -> Delta:
        """The whole first prompt, ending with the assistant header."""
        ids = self.encode(self.render(messages, generation_prompt=True))
        own = self.encode(self.render(messages, generation_prompt=True, blank=True))
        return Delta(ids, True, self._extra_special_ids(ids, own))

    def delta_after(self, history: list[dict[str, Any]], completion_ids: list[int], assistant: dict[str, Any],
                    new: list[dict[str, Any]], *, generation_prompt: bool) -> Delta:
        """Ids that follow ``completion_ids``: the rest of the assistant message, then ``new``.

        ``history`` ends where the completion's prompt ended (before ``assistant``).
        """
        text, stable = self._delta_text(history, completion_ids, assistant, new, generation_prompt)
        if not stable:
            history = _STANDIN
            text, _ = self._delta_text(history, completion_ids, assistant, new, generation_prompt)
        ids = self.encode(text)
        own, _ = self._delta_text(history, completion_ids, assistant, new, generation_prompt, blank=True)
        return Delta(ids, stable, self._extra_special_ids(ids, self.encode(own)))

    def _delta_text(self, history: list[dict[str, Any]], completion_ids: list[int], assistant: dict[str, Any],
                    new: list[dict[str, Any]], generation_prompt: bool, blank: bool = False) -> tuple[str, bool]:
        """The delta's text, and whether the template rendered ``history`` as a prefix of the whole."""
        before = self.render(history, generation_prompt=True, blank=blank)
        with_assistant = self.render(history + [assistant], generation_prompt=False, blank=blank)
        after = self.render(history + [assistant] + new, generation_prompt=generation_prompt, blank=blank)
        stable = with_assistant.startswith(before) and after.startswith(with_assistant)
        tail = self._assistant_tail(with_assistant[len(before):] if with_assistant.startswith(before) else "",
                                    completion_ids)
        return tail + after[len(with_assistant):], stable

    def _from_env(self, message: dict[str, Any], blank: bool) -> dict[str, Any]:
        content = message.get("content")
        if isinstance(content, str):
            return {**message, "content": _BLANK if blank else self.neutralise(content)}
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            parts = [{**part, "text": _BLANK if blank else self.neutralise(part["text"])}
                     if isinstance(part, dict) and isinstance(part.get("text"), str) else part for part in content]
            return {**message, "content": parts}
        return message

    def _extra_special_ids(self, ids: list[int], own: list[int]) -> int:
        """How many special ids ``ids`` holds beyond ``own`` (the template's; at least 1 if they differ)."""
        found = [i for i in ids if i in self._special_ids]
        expected = [i for i in own if i in self._special_ids]
        return 0 if found == expected else max(1, len(found) - len(expected))

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
