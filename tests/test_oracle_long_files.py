"""The oracle replays gold patches in files whose view pages are clipped (long lines, > 16,000 characters).

Synthesised tasks live in real modules; parse's ``__init__.py`` has 400-line pages longer than the
tool output cap, and the oracle used to read the clipped middle of such a page as file content.
"""

from __future__ import annotations

import difflib

from deepgym_agents import make_agent
from deepgym_envs.env import SWEEnv
from deepgym_envs.tasks import task_from_row
from tests.conftest import requires_namespace

LINE = "VALUE_{i:04d} = 'a fairly long constant line that makes every page of the view tool overflow'\n"


@requires_namespace
def test_oracle_resolves_a_bug_in_the_middle_of_a_long_file(tmp_path):
    repo = tmp_path / "longlib"
    (repo / "tests").mkdir(parents=True)
    body = "".join(LINE.format(i=i) for i in range(600))
    fixed = body + "\n\ndef answer():\n    return 42\n" + body
    (repo / "longmod.py").write_text(fixed)
    (repo / "tests" / "__init__.py").write_text("")  # so pytest puts the root on sys.path
    (repo / "tests" / "test_long.py").write_text("import longmod\n\n\ndef test_answer():\n    assert longmod.answer() == 42\n")
    buggy = fixed.replace("return 42", "return 41")
    gold = "diff --git a/longmod.py b/longmod.py\n" + "".join(difflib.unified_diff(
        buggy.splitlines(True), fixed.splitlines(True), "a/longmod.py", "b/longmod.py"))
    task = task_from_row({"instance_id": "long__lib-001", "repo_path": str(repo), "gold_reverse_base": True,
                          "problem_statement": "answer() is 41", "patch": gold,
                          "FAIL_TO_PASS": ["tests/test_long.py::test_answer"]})
    env = SWEEnv(tasks=[task], reward="outcome")
    try:
        obs, info = env.reset(options={"task_id": task.instance_id})
        agent = make_agent("oracle", task)
        agent.reset(obs, info)
        for _ in range(40):
            obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
            if terminated or truncated:
                break
        assert info["verdict"]["status"] == "resolved", info["verdict"]
    finally:
        env.close()
