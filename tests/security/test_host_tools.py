"""The agent's tools on the host side: nothing the agent shapes crashes, stalls or bloats the host.

The agent writes the workspace and names the paths; the host reads both. Each case here is
something an agent can do in one or two steps that once raised out of ``Tools`` (a masked
rollout) or cost the host far more than the agent's own input: the answer must be an
observation (a :class:`ToolError`, or a bounded result), at a cost bounded by the input's size.
"""

from __future__ import annotations

import os
import tracemalloc

import pytest
from _fixtures import needs_namespace, write_task_file

from deepgym_envs import tools as tools_module
from deepgym_envs.actions import ToolCall
from deepgym_envs.errors import ToolError
from deepgym_envs.sandbox import ExecResult, make_sandbox
from deepgym_envs.tasks import load_tasks
from deepgym_envs.tools import MAX_TEXT_BYTES, Tools
from deepgym_envs.trees import pristine_tree

pytestmark = [pytest.mark.filterwarnings("ignore::deepgym_envs.sandbox.local.LocalSandboxWarning"),
              pytest.mark.timeout(120)]

MB = 1 << 20


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    return write_task_file(tmp_path_factory.mktemp("host_tools") / "taskset")


@pytest.fixture
def tree(task_file, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    (task,) = load_tasks(task_file)
    return pristine_tree(task)


@pytest.fixture(params=[pytest.param("namespace", marks=needs_namespace), "local"])
def sandbox(request, tree):
    with make_sandbox(tree, request.param) as sb:
        yield sb


@pytest.fixture
def run(sandbox):
    tools = Tools(sandbox)
    return lambda name, **arguments: tools(ToolCall(name, arguments))


def peak_bytes(fn) -> tuple[object, int]:
    """What ``fn()`` returned (or raised), and the host's peak Python allocation while it ran."""
    tracemalloc.start()
    try:
        try:
            out: object = fn()
        except ToolError as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- class 2: the regex search's helper runs apart from the workspace, its output read warily -------

#: A workspace ``json.py`` that the helper would import from its working directory: it reads the
#: helper's arguments faithfully and prints what the agent likes instead of the search's result.
FORGER = """
import ast
def loads(text, **kw):
    return ast.literal_eval(text)
def dumps(obj, **kw):
    return {payload!r}
"""

FORGERIES = {
    "overflow": '[["FORGED.py:1: x"], 1e999]',  # int(inf): OverflowError on the host
    "deep": "[" * 200_000 + "]" * 200_000,  # the host's parse: RecursionError
    "forged_matches": '[["FORGED.py:1: planted by the workspace"], 1]',
    "wrong_shape": '{"a": 1}',
    "huge_int": '[[], ' + "9" * 5000 + ']',
}


@pytest.mark.parametrize("payload", FORGERIES.values(), ids=FORGERIES.keys())
def test_workspace_json_cannot_forge_or_crash_the_regex_search(sandbox, run, payload):
    sandbox.write_file("json.py", FORGER.format(payload=payload).encode())
    result = run("search", pattern=r"def \w+\(", regex=True)  # never an exception out of the tool
    assert "FORGED" not in result.output
    assert "src/wordy/core.py" in result.output  # the real search ran


HOSTILE_OUTPUTS = {
    "overflow": '[["a.py:1: x"], 1e999]',
    "deep": "[" * 200_000 + "]" * 200_000,
    "huge_int": '[[], ' + "9" * 5000 + ']',
    "not_a_list": '{"matches": []}',
    "matches_not_strings": '[[1, 2, {"a": []}], 3]',
    "too_many_matches": '[' + repr(["a.py:1: x"] * 10_000).replace("'", '"') + ', 10000]',
    "total_below_matches": '[["a.py:1: x", "a.py:2: y"], 1]',
    "bool_total": '[[], true]',
    "huge_line": '[["' + "x" * (8 * MB) + '"], 1]',
    "empty": "",
}


@pytest.mark.parametrize("stdout", HOSTILE_OUTPUTS.values(), ids=HOSTILE_OUTPUTS.keys())
def test_the_search_helpers_output_is_parsed_defensively(tree, monkeypatch, stdout):
    """Whatever the sandbox's ``python3`` prints (the agent may replace it), the host's answer is a
    ToolError at worst, never an exception out of the step."""
    with make_sandbox(tree, "local") as sb:
        tools = Tools(sb)
        monkeypatch.setattr(tools, "_own_command", lambda argv, timeout: ExecResult(0, stdout, ""))
        try:
            result = tools(ToolCall("search", {"pattern": "x", "regex": True}))
        except ToolError:
            return
        assert len(result.output) <= tools_module.MAX_OUTPUT_CHARS + 200


def test_the_search_helper_runs_isolated(sandbox, run, monkeypatch):
    seen = []
    real = Tools._own_command
    monkeypatch.setattr(Tools, "_own_command", lambda self, argv, t: seen.append(argv) or real(self, argv, t))
    run("search", pattern="x+", regex=True)
    (argv,) = seen
    assert argv[0] == "python3" and "-I" in argv[1:argv.index("-c")], argv


def test_a_deep_directory_does_not_crash_the_literal_search(sandbox, run):
    """The host's own walk (literal search) of a tree 1,100 directories deep: no RecursionError."""
    sandbox.exec("mkdir -p $(printf 'd/%.0s' $(seq 1100)) && echo needle > $(printf 'd/%.0s' $(seq 1100))f",
                 timeout=60)
    result = run("search", pattern="needle")
    assert "needle" in result.output
    sandbox.exec("rm -rf d", timeout=60)  # the local backend's own clean-up walks the tree by recursion


# -- class 3: tool inputs capped; the host's work bounded by what the agent wrote -------------------

@pytest.mark.timeout(30)
def test_a_path_of_400000_components_is_an_error_fast(run, monkeypatch):
    """Before, resolving it took ~110 s of host CPU (quadratic). Now it is refused before any
    work; the pytest timeout is the safety net, the assertion is on the refusal itself."""
    from deepgym_envs.sandbox import base

    steps = 0
    real_split = base._split

    def counting_split(*a, **kw):
        nonlocal steps
        out = real_split(*a, **kw)
        steps += len(out)
        return out

    monkeypatch.setattr(base, "_split", counting_split)
    for tool, args in [("view", {}), ("edit", {"command": "create", "file_text": "x"}),
                       ("search", {"pattern": "x"}), ("search", {"pattern": "x", "regex": True})]:
        with pytest.raises(ToolError, match="too long"):
            run(tool, path="./" * 400_000 + "README.md", **args)
    assert steps == 0  # refused by length, not resolved part by part


@pytest.mark.timeout(30)
def test_resolving_is_linear_in_the_path(sandbox, run):
    from deepgym_envs.sandbox import base

    """A path just under the cap, of many ``./`` and ``a/..`` parts, resolves (no quadratic work)."""
    max_path = getattr(base, "MAX_PATH_BYTES", 4096)
    sandbox.write_file("a/README2.md", b"hello\n")
    path = "a/../" * ((max_path - 20) // 5) + "a/README2.md"
    assert len(path.encode()) <= max_path
    assert "hello" in run("view", path=path).output


def test_edit_insert_in_a_16_mib_file_of_short_lines_is_bounded(sandbox, run):
    """Before: +681 MB of host memory (a list of 16 million one-character strings)."""
    sandbox.write_file("big.txt", b"\n" * MAX_TEXT_BYTES)
    for tool, args in [("edit", {"command": "insert", "insert_line": 1, "new_str": "x"}),
                       ("edit", {"command": "str_replace", "old_str": "\n\n\n", "new_str": "y"}),
                       ("view", {"view_range": [1, 5]})]:
        out, peak = peak_bytes(lambda: run(tool, path="big.txt", **args))
        assert peak < 6 * MAX_TEXT_BYTES, f"{tool} {args}: peak {peak / MB:.0f} MB"


def test_edit_insert_in_a_long_ordinary_file_still_works_within_bounds(sandbox, run):
    lines = b"".join(b"value_%06d = %d\n" % (i, i) for i in range(200_000))  # ~4 MB, 200,000 lines
    sandbox.write_file("long.py", lines)
    out, peak = peak_bytes(lambda: run("edit", command="insert", path="long.py", insert_line=150_000,
                                       new_str="inserted = True"))
    assert not isinstance(out, ToolError), out
    assert peak < 8 * len(lines), f"peak {peak / MB:.0f} MB for a {len(lines) / MB:.1f} MB file"
    data = sandbox.read_file("long.py").split(b"\n")
    assert data[149_999] == b"value_149999 = 149999" and data[150_000] == b"inserted = True"
    assert "150001\tinserted = True" in run("view", path="long.py", view_range=[150_000, 150_002]).output


def test_a_lone_surrogate_in_new_text_is_an_error_observation(run):
    with pytest.raises(ToolError, match="surrogate"):
        run("edit", command="create", path="new.py", file_text="x = '\ud800'\n")


def test_the_selection_reader_is_bounded_for_a_sparse_file(task_file, tree):
    """The shaping step reads each changed file to cut it into blocks (an ast tree, cached by its
    source): a 1 GiB sparse file the agent made was read, parsed and cached whole."""
    from deepgym_envs import grading
    from deepgym_envs import selection
    from deepgym_envs.selection import TestMap, TestRecord

    (task,) = load_tasks(task_file)
    with make_sandbox(tree, "local") as sb:
        host = sb.resolve("src/wordy/core.py")
        os.truncate(host, 1 << 30)  # what `truncate -s 1G src/wordy/core.py` makes
        tmap = TestMap("k", {t: TestRecord(blocks={"src/wordy/core.py": ["0:is_even"]}, outcome="passed")
                             for t in task.PASS_TO_PASS}, {}, [])
        ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        cached = getattr(selection, "_analysed", selection.analyse)  # the lru_cache that holds sources
        cached.cache_clear()
        out, peak = peak_bytes(lambda: grading._selection(task, tmap, tree, sb, ["src/wordy/core.py"], ids))
        assert out is None  # too large to tell: the full run
        assert peak < 64 * MB, f"peak {peak / MB:.0f} MB"
        assert cached.cache_info().currsize <= 1  # the pristine file at most, never the giant one
