"""The agent's tools, run against a real sandbox over a tiny task (namespace and local backends).

Every agent mistake must come back as a ToolError (the environment shows its message to the agent);
nothing here may leak the host's files.
"""

from __future__ import annotations

import pytest
from _fixtures import BUGGY_LINE, FIXED_LINE, needs_namespace, write_task_file

from deepgym_envs.actions import ToolCall, parse_action
from deepgym_envs.errors import ToolError
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.tasks import load_tasks
from deepgym_envs.tools import MAX_OUTPUT_CHARS, MAX_SEARCH_MATCHES, SCHEMAS, TOOLSETS, Tools, clip
from deepgym_envs.trees import pristine_tree

pytestmark = pytest.mark.filterwarnings("ignore::deepgym_envs.sandbox.local.LocalSandboxWarning")


@pytest.fixture(scope="module")
def wordy_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wordy_tools")
    return write_task_file(root / "taskset"), root / "cache"


@pytest.fixture
def wordy_tree(wordy_dirs, monkeypatch):
    task_file, cache = wordy_dirs
    monkeypatch.setenv("DEEPGYM_CACHE", str(cache))
    (task,) = load_tasks(task_file)
    return pristine_tree(task)


@pytest.fixture(params=[pytest.param("namespace", marks=needs_namespace), "local"])
def wordy_sandbox(request, wordy_tree):
    with make_sandbox(wordy_tree, request.param) as sb:
        yield sb


@pytest.fixture
def run(wordy_sandbox):
    """Call a tool by name, as the environment does; returns the ToolResult."""
    tools = Tools(wordy_sandbox)

    def call(name: str, **arguments: object):
        return tools(ToolCall(name, arguments))

    call.sandbox = wordy_sandbox  # type: ignore[attr-defined]
    return call


def refused(run, name: str, **arguments: object) -> str:
    with pytest.raises(ToolError) as info:
        run(name, **arguments)
    return str(info.value)


def test_pristine_tree_is_the_buggy_base_state(wordy_tree, wordy_dirs):
    assert wordy_tree.is_relative_to(wordy_dirs[1])  # built under $DEEPGYM_CACHE, not the user's cache
    text = (wordy_tree / "src/wordy/core.py").read_text()
    assert BUGGY_LINE in text and FIXED_LINE not in text


# -- view ----------------------------------------------------------------------------------------

def test_view_file_with_line_numbers(run):
    out = run("view", path="src/wordy/core.py").output
    lines = out.splitlines()
    assert lines[0] == "src/wordy/core.py (8 lines)"
    assert lines[1] == "     1\tdef shout(text):"
    assert lines[8] == "     8\t" + BUGGY_LINE.rstrip("\n")


def test_view_accepts_absolute_paths_under_the_workdir(run):
    out = run("view", path=f"{run.sandbox.workdir}/src/wordy/core.py").output
    assert "def is_even(n):" in out


def test_view_range(run):
    lines = run("view", path="src/wordy/core.py", view_range=[6, 7]).output.splitlines()
    assert lines[1:] == ["     6\tdef is_even(n):", '     7\t    """True when n is even."""']
    to_end = run("view", path="src/wordy/core.py", view_range=[7, -1]).output.splitlines()
    assert [line.split("\t")[0].strip() for line in to_end[1:]] == ["7", "8"]
    assert "outside the file's 8 lines" in refused(run, "view", path="src/wordy/core.py", view_range=[20, 30])
    assert "[start, end]" in refused(run, "view", path="src/wordy/core.py", view_range=[3])


def test_view_directory_lists_two_levels_without_git(run):
    out = run("view", path=".").output
    entries = out.splitlines()[1:]
    assert {"README.md", "pyproject.toml", "src/", "  wordy/", "tests/", "  test_core.py"} <= set(entries)
    assert ".git/" not in entries
    sub = run("view", path="src/wordy").output
    assert "__init__.py" in sub and "core.py" in sub


def test_view_missing_file(run):
    assert "no such file" in refused(run, "view", path="src/wordy/nothere.py")


def test_view_binary_file_is_not_dumped(run):
    run.sandbox.write_file("data.bin", b"\x89PNG\0\0\x01binary")
    out = run("view", path="data.bin").output
    assert "binary file (13 bytes)" in out and "PNG" not in out


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "src/../../etc/passwd"])
def test_view_outside_the_workspace_is_refused(run, path):
    msg = refused(run, "view", path=path)
    assert "outside the workspace" in msg and "root:" not in msg


def test_symlink_pointing_outside_is_refused(run):
    made = run("bash", command="ln -s /etc/passwd leak && ln -s ../../../../../etc leakdir && echo made")
    assert made.output == "made"
    assert "outside the workspace" in refused(run, "view", path="leak")
    assert "outside the workspace" in refused(run, "view", path="leakdir/passwd")
    assert "outside the workspace" in refused(run, "edit", command="str_replace", path="leak",
                                              old_str="root", new_str="toor")
    # the listing shows the link as a link, without following it
    assert "leak@" in run("view", path=".").output.splitlines()


# -- search --------------------------------------------------------------------------------------

def test_search_literal_finds_file_and_line(run):
    out = run("search", pattern="n % 2").output
    assert out == "src/wordy/core.py:8: return n % 2 == 1"


def test_search_literal_does_not_treat_pattern_as_regex(run):
    assert "no matches" in run("search", pattern="shout(.*)").output
    assert "src/wordy/core.py:1:" in run("search", pattern="shout(text)").output


def test_search_regex_and_include_glob(run):
    out = run("search", pattern=r"def (shout|is_even)\(", regex=True).output
    assert out.splitlines() == ["src/wordy/core.py:1: def shout(text):", "src/wordy/core.py:6: def is_even(n):"]
    everywhere = run("search", pattern="wordy").output
    assert "README.md:1:" in everywhere and "pyproject.toml" in everywhere
    only_py = run("search", pattern="wordy", include="*.py").output
    assert "README.md" not in only_py and "pyproject.toml" not in only_py
    assert "src/wordy/__init__.py:1:" in only_py


def test_search_in_a_subdirectory(run):
    out = run("search", pattern="shout", path="tests").output
    assert out and all(line.startswith("tests/test_core.py:") for line in out.splitlines())


def test_search_output_is_bounded(run):
    run.sandbox.write_file("many.txt", "".join(f"needle {i}\n" for i in range(150)).encode())
    lines = run("search", pattern="needle").output.splitlines()
    assert len(lines) == MAX_SEARCH_MATCHES + 1
    assert lines[0] == "many.txt:1: needle 0"
    assert lines[-1] == "[50 more matches not shown; narrow the search]"


def test_search_errors(run):
    assert "invalid regular expression" in refused(run, "search", pattern="(unclosed", regex=True)
    assert "no such file or directory" in refused(run, "search", pattern="x", path="nowhere")
    assert "must not be empty" in refused(run, "search", pattern="")
    assert "outside the workspace" in refused(run, "search", pattern="root", path="/etc")


# -- edit ----------------------------------------------------------------------------------------

def test_str_replace_unique_edits_the_file_and_shows_the_change(run):
    res = run("edit", command="str_replace", path="src/wordy/core.py", old_str="n % 2 == 1", new_str="n % 2 == 0")
    assert res.changed_workspace
    assert "edited src/wordy/core.py" in res.output and "     8\t    return n % 2 == 0" in res.output
    assert run.sandbox.read_file("src/wordy/core.py").decode().endswith(FIXED_LINE)
    assert "+    return n % 2 == 0" in run.sandbox.diff()


def test_str_replace_non_unique_lists_the_lines(run):
    msg = refused(run, "edit", command="str_replace", path="src/wordy/core.py", old_str='"""', new_str="'''")
    assert "occurs 4 times" in msg and "lines 2, 2, 7, 7" in msg and "more context" in msg
    assert run.sandbox.diff() == ""  # nothing changed


def test_str_replace_not_found(run):
    msg = refused(run, "edit", command="str_replace", path="src/wordy/core.py",
                  old_str="return n %2 == 1", new_str="x")
    assert "does not occur" in msg and "whitespace" in msg


def test_insert_after_a_line_and_at_the_top(run):
    run("edit", command="insert", path="src/wordy/core.py", insert_line=8, new_str="\n\nLIMIT = 3")
    run("edit", command="insert", path="src/wordy/core.py", insert_line=0, new_str="# header")
    lines = run.sandbox.read_file("src/wordy/core.py").decode().splitlines()
    assert lines[0] == "# header" and lines[1] == "def shout(text):"
    assert lines[-1] == "LIMIT = 3"
    assert "between 0 and 12" in refused(run, "edit", command="insert", path="src/wordy/core.py",
                                         insert_line=99, new_str="x")


def test_create_a_new_file_and_refuse_to_overwrite(run):
    res = run("edit", command="create", path="src/wordy/extra/util.py", file_text="def f():\n    return 1\n")
    assert res.output == "created src/wordy/extra/util.py (2 lines)"
    assert run("view", path="src/wordy/extra/util.py").output.splitlines()[1] == "     1\tdef f():"
    msg = refused(run, "edit", command="create", path="src/wordy/core.py", file_text="oops")
    assert "already exists" in msg
    assert BUGGY_LINE in run.sandbox.read_file("src/wordy/core.py").decode()


def test_edit_refuses_directories_and_missing_arguments(run):
    assert "is a directory" in refused(run, "edit", command="str_replace", path="src", old_str="a", new_str="b")
    assert "old_str and new_str are required" in refused(run, "edit", command="str_replace",
                                                         path="src/wordy/core.py", old_str="x")
    assert "file_text is required" in refused(run, "edit", command="create", path="new.py")


# -- run_tests -----------------------------------------------------------------------------------

def test_run_tests_whole_suite_then_a_selection(run):
    res = run("run_tests")
    assert "2 passed" in res.output
    assert res.info["test_results"] == {"tests/test_core.py::test_shout": "passed",
                                        "tests/test_core.py::test_shout_empty": "passed"}
    assert res.info["test_summary"]["passed"] == 2 and res.info["exit_code"] == 0
    one = run("run_tests", tests=["tests/test_core.py::test_shout"])
    assert one.info["test_results"] == {"tests/test_core.py::test_shout": "passed"}
    assert "1 passed" in one.output


def test_run_tests_reports_a_failing_test_until_the_bug_is_fixed(run):
    run("edit", command="create", path="tests/test_parity.py",
        file_text="from wordy import is_even\n\n\ndef test_four():\n    assert is_even(4)\n")
    res = run("run_tests", tests=["tests/test_parity.py"])
    assert res.info["test_results"] == {"tests/test_parity.py::test_four": "failed"}
    assert res.info["exit_code"] == 1 and "1 failed" in res.output
    run("edit", command="str_replace", path="src/wordy/core.py", old_str="== 1", new_str="== 0")
    assert run("run_tests").info["test_summary"] == {"passed": 3, "failed": 0, "error": 0, "skipped": 0}


def test_run_tests_refuses_options(run):
    assert "options are not accepted" in refused(run, "run_tests", tests=["--co"])


# -- bash ----------------------------------------------------------------------------------------

def test_bash_output_and_exit_code(run):
    res = run("bash", command="echo out; echo err >&2; cat README.md")
    assert res.output.splitlines() == ["out", "wordy: small text and number helpers", "err"]
    assert res.info["exit_code"] == 0 and res.changed_workspace
    failed = run("bash", command="echo nope; exit 3")
    assert failed.output == "nope\n[exit code 3]" and failed.info["exit_code"] == 3
    assert run("bash", command="true").output == "(no output)"


def test_bash_runs_in_the_repository_and_sees_edits(run):
    run("edit", command="str_replace", path="src/wordy/core.py", old_str="== 1", new_str="== 0")
    out = run("bash", command="pwd; PYTHONPATH=src python -c 'import wordy; print(wordy.is_even(4))'").output
    assert out.splitlines() == [run.sandbox.workdir, "True"]


def test_bash_timeout_kills_and_says_so(run):
    res = run("bash", command="echo started; sleep 30; echo never", timeout=1)
    assert res.output == "started\n[command killed after 1s]"
    # the sandbox is still usable afterwards
    assert run("bash", command="echo alive").output == "alive"


def test_bash_huge_output_is_truncated_and_clipped(run):
    res = run("bash", command="python -c \"print('x' * 2_000_000)\"; echo tail-marker")
    assert len(res.output) <= MAX_OUTPUT_CHARS + 200
    assert "characters elided" in res.output
    assert res.output.rstrip().endswith("[output truncated]")


def test_bash_empty_command(run):
    assert "command is empty" in refused(run, "bash", command="  ")


# -- dispatch ------------------------------------------------------------------------------------

def test_unknown_tool_lists_the_available_ones(run):
    msg = refused(run, "open_file", path="a.py")
    assert "unknown tool 'open_file'" in msg and "view, search, edit, run_tests, bash, submit" in msg


def test_bad_arguments_are_refused_before_the_tool_runs(run):
    assert "missing required argument(s): path" in refused(run, "view")
    assert "unknown argument(s): cmd" in refused(run, "bash", command="touch made", cmd="x")
    assert not run.sandbox.exists("made")


def test_extra_calls_in_one_message_are_noted(wordy_sandbox):
    tools = Tools(wordy_sandbox)
    text = ('<tool_call>{"name": "bash", "arguments": {"command": "echo one"}}</tool_call>'
            '<tool_call>{"name": "bash", "arguments": {"command": "echo two"}}</tool_call>')
    out = tools(parse_action(text)).output
    assert out.startswith("one") and "two" not in out.splitlines()
    assert "1 further tool call(s) in this message were ignored" in out


def test_submit(run):
    res = run("submit")
    assert res.submitted and res.output == "submitted"


def test_bash_toolset_only_has_bash_and_submit(wordy_sandbox):
    tools = Tools(wordy_sandbox, "bash")
    with pytest.raises(ToolError, match="unknown tool 'view'; available: bash, submit"):
        tools(ToolCall("view", {"path": "."}))
    assert tools(ToolCall("bash", {"command": "echo hi"})).output == "hi"
    with pytest.raises(ValueError, match="unknown toolset"):
        Tools(wordy_sandbox, "everything")


def test_schemas_are_openai_function_tools():
    for name in TOOLSETS["default"]:
        schema = SCHEMAS[name]
        assert schema["type"] == "function" and schema["function"]["name"] == name
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])


def test_clip_keeps_head_and_tail():
    text = "HEAD" + "x" * 50 + "TAIL"
    out = clip(text, 20)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "[... 38 characters elided ...]" in out
    assert clip("short", 20) == "short"
