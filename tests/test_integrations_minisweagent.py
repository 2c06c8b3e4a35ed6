"""mini-swe-agent's own DefaultAgent, driven by its own scripted model, runs on a DeepGym sandbox
and gets a hidden-test verdict (deepgym_agents.integrations.minisweagent)."""

from __future__ import annotations


import pytest

from tests._readme import readme_snippet
from tests._fixtures import needs_namespace




TASK = "deepgym__tmplite-001"
FIX = "sed -i 's/if len(text) < length:/if len(text) <= length:/' src/tmplite/filters.py"

#: The README's "Use with mini-swe-agent" snippet, run as is (test_readme_snippet).
README_SNIPPET = '''
from minisweagent.agents.default import DefaultAgent
from minisweagent.models.test_models import DeterministicModel, make_output
from deepgym_agents.integrations.minisweagent import DeepGymEnvironment

# mini-swe-agent's scripted test model stands in for an LLM: one fix, then the submit line.
model = DeterministicModel(outputs=[
    make_output("Fix the comparison.", [{"command": "sed -i 's/if len(text) < length:/if len(text) <= length:/' "
                                                    "src/tmplite/filters.py"}]),
    make_output("Done.", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]),
])
with DeepGymEnvironment(task_id="deepgym__tmplite-001") as env:
    agent = DefaultAgent(model, env, system_template="You fix bugs with bash.", instance_template="{{task}}")
    result = agent.run(env.task.problem_statement)
print(result["exit_status"], result["verdict"]["status"])      # Submitted resolved
'''


@pytest.fixture
def mswea(tmp_path, monkeypatch):
    """mini-swe-agent, its start-up banner off and its global config folder private to the test."""
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mswea"))
    return pytest.importorskip("minisweagent")


def _run(outputs, **env_kwargs):
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.test_models import DeterministicModel, make_output

    from deepgym_agents.integrations.minisweagent import DeepGymEnvironment

    model = DeterministicModel(outputs=[make_output("", [{"command": c}]) for c in outputs], cost_per_call=0.0)
    with DeepGymEnvironment(task_id=TASK, **env_kwargs) as env:
        agent = DefaultAgent(model, env, system_template="You fix bugs with bash.",
                             instance_template="{{task}} (in {{cwd}} on {{system}})", cost_limit=0)
        result = agent.run(env.task.problem_statement)
        return result, env, agent


@needs_namespace
def test_fix_then_submit_is_resolved(mswea):
    result, env, agent = _run([FIX, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    assert result["exit_status"] == "Submitted"
    assert result["verdict"]["status"] == "resolved"
    assert "<= length" in result["submission"]  # the workspace's diff, not what the agent printed
    assert env.rewards[-1] > 0 and result["episode_return"] == pytest.approx(sum(env.rewards))
    # the template saw the task and the sandbox's working directory
    assert f"(in {env.workdir} on " in agent.messages[1]["content"]
    assert agent.serialize()["info"]["deepgym"]["verdict"]["status"] == "resolved"


@needs_namespace
def test_submit_without_fix_is_unresolved(mswea):
    result, env, agent = _run(["grep -n 'len(text)' src/tmplite/filters.py",
                               "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo my patch"])
    assert result["exit_status"] == "Submitted"
    assert result["verdict"]["status"] == "unresolved"
    assert result["submission"] == ""
    # the first command's output reached the agent as an observation, with its return code
    observation = agent.messages[3]["content"]
    assert "if len(text) < length:" in observation and "<returncode>0</returncode>" in observation


@needs_namespace
def test_failed_command_does_not_submit_and_budget_still_grades(mswea):
    # The marker only counts from a command that succeeded; the env's step budget then ends the run.
    result, env, agent = _run(["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; false", FIX],
                              env_kwargs={"max_steps": 2, "reward": "outcome"})
    assert result["exit_status"] == "LimitsExceeded"
    assert result["verdict"]["status"] == "resolved"  # graded at the budget, with the fix in place
    assert "<returncode>1</returncode>" in agent.messages[3]["content"]


@needs_namespace
def test_readme_snippet(mswea, capsys):
    exec(compile(readme_snippet("### mini-swe-agent", README_SNIPPET), "README.md (mini-swe-agent)", "exec"), {})
    assert capsys.readouterr().out.split() == ["Submitted", "resolved"]
