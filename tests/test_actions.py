"""Parsing what agents emit: hermes text, OpenAI tool calls, plain dicts; argument checking."""

from __future__ import annotations

import json

import pytest

from deepgym_envs.actions import ToolCall, check_arguments, parse_action
from deepgym_envs.errors import ToolError
from deepgym_envs.tools import SCHEMAS


def hermes(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


# -- accepted forms ------------------------------------------------------------------------------

def test_hermes_block_inside_prose():
    text = ("Let me look at the file first.\n\n"
            '<tool_call>\n{"name": "view", "arguments": {"path": "src/a.py", "view_range": [1, 20]}}\n</tool_call>\n'
            "I'll continue after that.")
    call = parse_action(text)
    assert call == ToolCall("view", {"path": "src/a.py", "view_range": [1, 20]})
    assert call.extra_calls == 0


def test_unterminated_hermes_block_is_accepted():
    # vLLM stops generation at the </tool_call> stop string, so the closing tag is often missing.
    call = parse_action('Running the tests.\n<tool_call>{"name": "run_tests", "arguments": {}}')
    assert call.name == "run_tests" and call.arguments == {}


def test_several_hermes_blocks_run_the_first_and_count_the_rest():
    text = hermes("view", path="a.py") + "\n" + hermes("bash", command="ls") + hermes("submit")
    call = parse_action(text)
    assert call.name == "view" and call.arguments == {"path": "a.py"}
    assert call.extra_calls == 2


def test_bytes_are_decoded():
    assert parse_action(hermes("submit").encode()).name == "submit"


def test_openai_tool_call_object_with_json_string_arguments():
    action = {"id": "call_7", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": "ls -la", "timeout": 5})}}
    call = parse_action(action)
    assert call == ToolCall("bash", {"command": "ls -la", "timeout": 5}, "call_7")
    assert call.to_dict() == {"name": "bash", "arguments": {"command": "ls -la", "timeout": 5}, "id": "call_7"}


def test_openai_empty_argument_string_means_no_arguments():
    call = parse_action({"type": "function", "function": {"name": "submit", "arguments": ""}})
    assert call.name == "submit" and call.arguments == {}


def test_assistant_message_with_tool_calls():
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "view", "arguments": '{"path": "."}'}},
        {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
    ]}
    call = parse_action(message)
    assert (call.name, call.arguments, call.id, call.extra_calls) == ("view", {"path": "."}, "c1", 1)


def test_assistant_message_with_empty_tool_calls_falls_back_to_its_text():
    message = {"role": "assistant", "tool_calls": [], "content": "ok " + hermes("submit")}
    assert parse_action(message).name == "submit"


def test_plain_dict():
    call = parse_action({"name": "search", "arguments": {"pattern": "def main"}})
    assert call == ToolCall("search", {"pattern": "def main"})
    assert parse_action({"name": "submit"}).arguments == {}


def test_a_toolcall_passes_through():
    call = ToolCall("submit")
    assert parse_action(call) is call


# -- rejected forms: a ToolError whose message tells the agent what to do -------------------------

@pytest.mark.parametrize("action, words", [
    ("I think the bug is in parse(). Let me fix it.", "no tool call found"),
    ("<tool_call>{\"name\": \"view\", \"arguments\": {\"path\": }</tool_call>", "not valid JSON"),
    ("<tool_call>[\"view\"]</tool_call>", "must be a JSON object"),
    (hermes("view") .replace('"arguments": {}', '"arguments": [1, 2]'), "must be a JSON object"),
    ('<tool_call>{"arguments": {"path": "."}}</tool_call>', "no 'name'"),
    ({"name": "", "arguments": {}}, "no 'name'"),
    ({"type": "function", "function": {"name": "bash", "arguments": "{not json"}}, "not valid JSON"),
    ({"type": "function", "function": {"name": "bash", "arguments": "\"ls\""}}, "must be a JSON object"),
    ({"role": "assistant", "tool_calls": [], "content": None}, "no tool call"),
    (42, "unsupported action type int"),
])
def test_malformed_actions_raise_tool_error_with_guidance(action, words):
    with pytest.raises(ToolError, match=words):
        parse_action(action)


def test_no_block_error_shows_the_expected_format():
    with pytest.raises(ToolError) as info:
        parse_action("just prose")
    assert "<tool_call>" in str(info.value) and "</tool_call>" in str(info.value)


# -- argument checking against the tool schemas --------------------------------------------------

def check(name: str, **arguments: object) -> dict:
    return check_arguments(ToolCall(name, arguments), SCHEMAS[name])


def test_valid_arguments_come_back_unchanged():
    assert check("view", path="a.py", view_range=[3, 9]) == {"path": "a.py", "view_range": [3, 9]}


def test_missing_required_argument():
    with pytest.raises(ToolError, match=r"edit: missing required argument\(s\): path"):
        check("edit", command="create")


def test_unknown_argument_lists_the_accepted_ones():
    with pytest.raises(ToolError) as info:
        check("view", path="a.py", line=3)
    assert "unknown argument(s): line" in str(info.value)
    assert "path" in str(info.value) and "view_range" in str(info.value)


@pytest.mark.parametrize("name, args, words", [
    ("view", {"path": 7}, "'path' must be string, got int"),
    ("bash", {"command": "ls", "timeout": "soon"}, "'timeout' must be integer, got str"),
    ("bash", {"command": "ls", "timeout": True}, "'timeout' must be integer, got bool"),
    ("search", {"pattern": "x", "regex": "yes"}, "'regex' must be boolean"),
    ("view", {"path": "a", "view_range": [1, "end"]}, "list of integers"),
    ("run_tests", {"tests": ["a.py", 3]}, "list of strings"),
])
def test_wrong_types_are_refused(name, args, words):
    with pytest.raises(ToolError, match=words):
        check(name, **args)


def test_quoted_integer_is_accepted_as_an_integer():
    assert check("bash", command="sleep 1", timeout="5") == {"command": "sleep 1", "timeout": 5}
    assert check("edit", command="insert", path="a.py", insert_line="-1")["insert_line"] == -1


def test_single_string_where_a_list_is_expected_becomes_a_list():
    assert check("run_tests", tests="tests/test_a.py") == {"tests": ["tests/test_a.py"]}


def test_enum_values_are_enforced():
    with pytest.raises(ToolError, match="must be one of str_replace, insert, create"):
        check("edit", command="delete", path="a.py")
