"""Turning what an agent emits into a :class:`ToolCall`.

Accepted forms:

* assistant text with a hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
  (what vLLM's hermes parser and Qwen models emit);
* an OpenAI tool-call object ``{"type": "function", "function": {"name", "arguments": "<json>"}}``,
  or an assistant message carrying ``tool_calls``;
* a plain dict ``{"name": ..., "arguments": {...}}``.

Anything else raises :class:`ToolError`, whose message becomes the agent's observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from deepgym_envs.errors import ToolError

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_OPEN_ONLY = re.compile(r"<tool_call>\s*(\{.*\})\s*$", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed action."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    extra_calls: int = 0
    """How many further tool calls came in the same action (ignored: one action per step)."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id}


def parse_action(action: Any) -> ToolCall:
    """Parse one action in any accepted form; raises ToolError with a message for the agent."""
    if isinstance(action, ToolCall):
        return action
    if isinstance(action, (bytes, bytearray)):
        action = action.decode("utf-8", "replace")
    if isinstance(action, str):
        return _from_text(action)
    if isinstance(action, dict):
        if "tool_calls" in action:
            calls = action.get("tool_calls") or []
            if not isinstance(calls, list) or not calls:
                if isinstance(action.get("content"), str):
                    return _from_text(action["content"])
                raise ToolError("the message has no tool call; call exactly one tool")
            first = _from_dict(calls[0])
            return ToolCall(first.name, first.arguments, first.id, len(calls) - 1)
        return _from_dict(action)
    raise ToolError(f"unsupported action type {type(action).__name__}; send text with a <tool_call> block")


def _from_text(text: str) -> ToolCall:
    blocks = _TOOL_CALL.findall(text)
    if not blocks:
        unterminated = _OPEN_ONLY.search(text)  # generation stopped at </tool_call>
        if unterminated:
            blocks = [unterminated.group(1)]
    if not blocks:
        raise ToolError('no tool call found. Reply with exactly one <tool_call>{"name": "...", '
                        '"arguments": {...}}</tool_call> block.')
    try:
        data = json.loads(blocks[0])
    except json.JSONDecodeError as exc:
        raise ToolError(f"the <tool_call> block is not valid JSON: {exc.msg.removesuffix(' at')} at line "
                        f"{exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # an integer of 4300+ digits; nesting past the stack
        raise ToolError(f"the <tool_call> block cannot be read: {_reason(exc)}") from None
    call = _from_dict(data)
    return ToolCall(call.name, call.arguments, call.id, len(blocks) - 1)


def _from_dict(data: Any) -> ToolCall:
    if not isinstance(data, dict):
        raise ToolError("a tool call must be a JSON object with 'name' and 'arguments'")
    call_id = data.get("id")
    if isinstance(data.get("function"), dict):  # OpenAI tool-call object
        data = data["function"]
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ToolError("the tool call has no 'name'")
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments of {name!r} are not valid JSON: {exc.msg.removesuffix(' at')}") from None
        except (ValueError, RecursionError) as exc:
            raise ToolError(f"arguments of {name!r} cannot be read: {_reason(exc)}") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError(f"arguments of {name!r} must be a JSON object")
    return ToolCall(name, args, call_id if isinstance(call_id, str) else None)


def check_arguments(call: ToolCall, schema: dict[str, Any]) -> dict[str, Any]:
    """Validate arguments against a tool's JSON schema (required keys, types, unknown keys)."""
    params = schema["function"]["parameters"]
    props: dict[str, Any] = params.get("properties", {})
    missing = [k for k in params.get("required", []) if k not in call.arguments]
    if missing:
        raise ToolError(f"{call.name}: missing required argument(s): {', '.join(missing)}")
    unknown = [k for k in call.arguments if k not in props]
    if unknown:
        raise ToolError(f"{call.name}: unknown argument(s): {', '.join(unknown)}; "
                        f"it takes {', '.join(props) or 'none'}")
    out = {}
    for key, value in call.arguments.items():
        out[key] = _check_type(call.name, key, value, props[key])
    return out


_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict, "number": (int, float)}


def _check_type(tool: str, key: str, value: Any, prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)  # models often quote numbers
    if kind == "array" and isinstance(value, str):
        value = [value]
    expected = _TYPES.get(kind or "", object)
    if kind == "integer" and isinstance(value, bool) or not isinstance(value, expected):
        raise ToolError(f"{tool}: argument {key!r} must be {kind}, got {type(value).__name__}")
    if "enum" in prop and value not in prop["enum"]:
        raise ToolError(f"{tool}: argument {key!r} must be one of {', '.join(map(str, prop['enum']))}")
    if kind == "array" and prop.get("items", {}).get("type") == "integer":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ToolError(f"{tool}: argument {key!r} must be a list of integers")
    if kind == "array" and prop.get("items", {}).get("type") == "string":
        if not all(isinstance(v, str) for v in value):
            raise ToolError(f"{tool}: argument {key!r} must be a list of strings")
    return value


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
