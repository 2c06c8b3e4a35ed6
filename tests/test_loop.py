"""The agent loop end to end: token ids that line up with what was generated, the scripted backend
solving tasks, the chat client against a local server, context limits, and ``deepgym eval``."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _chat_server import chat_server  # noqa: E402
from _loop_helpers import FIX_CALLS, FIX_SCRIPT, SANDBOX, Recording, completion  # noqa: E402
from deepgym_agents.baselines import parse_unified_diff  # noqa: E402
from deepgym_agents.config import CollectConfig  # noqa: E402
from deepgym_agents.base import tool_call  # noqa: E402
from deepgym_agents.evaluate import pass_at_k  # noqa: E402
from deepgym_agents.llm import SamplingParams  # noqa: E402
from deepgym_agents.llm.hf import HFBackend  # noqa: E402
from deepgym_agents.llm.openai_client import OpenAIBackend  # noqa: E402
from deepgym_agents.llm.scripted import ScriptedLLM  # noqa: E402
from deepgym_agents.loop import collect  # noqa: E402
from deepgym_agents.tiny_model import build_model, build_tokenizer, write_tiny_model  # noqa: E402
from deepgym_agents.trajectory import read_trajectories  # noqa: E402
from deepgym_envs.errors import DeepgymError  # noqa: E402
from deepgym_envs.evaluation import EpisodeResult  # noqa: E402
from deepgym_envs.tasks import Task, load_tasks  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:sandbox='local'")


def env_kwargs(task: Task) -> dict:
    return {"tasks": [task], "sandbox": SANDBOX}


def quiet(task: Task) -> CollectConfig:
    """One episode of ``task`` on the test sandbox, no progress bar."""
    return CollectConfig(env_kwargs=env_kwargs(task), show_progress=False)


def test_collect_config_leaves_the_step_budget_to_the_env_unless_told() -> None:
    assert "max_steps" not in CollectConfig(env_kwargs={"sandbox": SANDBOX}).gym_kwargs()  # SWE-v0's own: 50
    assert CollectConfig(max_steps=3).gym_kwargs()["max_steps"] == 3
    assert CollectConfig(max_steps=3, env_kwargs={"max_steps": 7}).gym_kwargs()["max_steps"] == 7
    with pytest.raises(DeepgymError, match="at least 1"):
        CollectConfig(k=0)
    with pytest.raises(DeepgymError, match="max_steps=-1"):
        CollectConfig(max_steps=-1)


def test_tiny_model_episode_ids_and_masks_line_up(toy_task: Task, tmp_path) -> None:
    tok = build_tokenizer()
    llm = Recording(HFBackend(build_model(tok, hidden=32), tok, model_name="tiny"))
    out = tmp_path / "trajs.jsonl"
    trajs = collect(llm, [toy_task.instance_id], CollectConfig(env_kwargs=env_kwargs(toy_task), k=2, max_steps=3,
                    params=SamplingParams(max_tokens=10, seed=7), out=out, show_progress=False))
    assert len(trajs) == 2 and {t.group_id for t in trajs} == {trajs[0].group_id}
    assert sorted(t.rollout_index for t in trajs) == [0, 1]
    served = [(tuple(p), tuple(g.completion_ids), tuple(g.logprobs)) for p, g in llm.calls]
    for traj in trajs:
        assert traj.stop_reason == "max_steps" and len(traj.turns) == 3 and traj.verdict["status"] == "unresolved"
        assert traj.metadata["ids"] == "complete" and traj.metadata["template_prefix_stable"]
        flat = traj.flatten()
        pos = 0
        for turn in traj.turns:
            pos += len(turn.prompt_ids)
            # The engine was fed exactly the flattened ids before this completion, and the completion
            # and its logprobs are exactly what it returned for that prompt.
            call = (tuple(flat.input_ids[:pos]), tuple(turn.completion_ids), tuple(turn.completion_logprobs))
            assert call in served
            assert flat.loss_mask[pos:pos + len(turn.completion_ids)] == [1] * len(turn.completion_ids)
            assert flat.behavior_logprobs[pos:pos + len(turn.completion_ids)] == turn.completion_logprobs
            pos += len(turn.completion_ids) + len(turn.observation_ids)
        assert pos == len(flat.input_ids)
        generated = [i for i, m in zip(flat.input_ids, flat.loss_mask) if m]
        assert generated == [i for t in traj.turns for i in t.completion_ids]
        assert traj.turns[0].prompt_ids[-3:] == tok.encode("<|im_start|>assistant\n", add_special_tokens=False)[-3:]
    assert len(served) == 6 and trajs[0].turns[0].completion_ids != trajs[1].turns[0].completion_ids
    assert [t.episode_id for t in read_trajectories(out)] != []  # written as each episode ended
    assert {t.episode_id for t in read_trajectories(out)} == {t.episode_id for t in trajs}


def test_scripted_backend_solves_a_builtin_task(tmp_path) -> None:
    task = load_tasks("builtin")[0]
    script = [tool_call("edit", command="str_replace", path=fp.path, old_str="\n".join(h.old), new_str="\n".join(h.new))
              for fp in parse_unified_diff(task.patch) for h in reversed(fp.hunks)]
    script += [tool_call("run_tests"), tool_call("submit")]
    llm = Recording(ScriptedLLM(script, build_tokenizer()))
    trajs = collect(llm, [task.instance_id], CollectConfig(env_kwargs={"sandbox": SANDBOX}, k=2, concurrency=2,
                    params=SamplingParams(max_tokens=8192), show_progress=False))
    for traj in trajs:
        assert traj.resolved and traj.stop_reason == "submitted" and not traj.masked
        assert len(traj.turns) == len(script) and traj.turns[-1].terminated
        assert traj.episode_return == pytest.approx(sum(traj.rewards)) and traj.episode_return > 1
        # Valid text round-trips, so the incremental ids equal the template of the whole conversation.
        assert traj.metadata["template_match"] is True
        assert "diff --git" in traj.metadata["patch"]


def test_context_length_ends_the_episode_cleanly_and_still_grades(toy_task: Task) -> None:
    tok = build_tokenizer()
    llm = ScriptedLLM([tool_call("view", path="src/calc/ops.py")] * 5, tok)
    first_prompt = len(collect(ScriptedLLM([tool_call("submit")], tok), [toy_task.instance_id],
                               quiet(toy_task))[0].turns[0].prompt_ids)
    trajs = collect(llm, [toy_task.instance_id], CollectConfig(env_kwargs=env_kwargs(toy_task), max_steps=10,
                    max_context_tokens=first_prompt + 200, show_progress=False))
    traj = trajs[0]
    assert traj.stop_reason == "context_length" and traj.verdict["status"] == "unresolved" and not traj.masked
    assert 1 <= len(traj.turns) < 5
    assert len(traj.flatten().input_ids) <= first_prompt + 200  # the record fits the context too
    assert traj.metadata["observation_cut"] > 0
    assert traj.metadata["graded_by"] == "loop_submit"


def test_a_template_that_is_not_prefix_stable(toy_task: Task) -> None:
    """Qwen3-style: earlier assistant turns are re-rendered differently. The fed ids stay the
    engine's own; the episode says the template did not match the incremental ids."""
    tok = build_tokenizer()
    tok.chat_template = tok.chat_template.replace(
        "{% if message.content %}{{ message.content }}{% endif %}",
        "{% if message.content %}{% if loop.last %}{{ message.content }}{% else %}[earlier]{% endif %}{% endif %}")
    llm = Recording(ScriptedLLM(FIX_SCRIPT, tok))
    traj = collect(llm, [toy_task.instance_id], quiet(toy_task))[0]
    assert traj.resolved
    assert traj.metadata["template_prefix_stable"] is False and traj.metadata["template_match"] is False
    flat = traj.flatten()
    second_prompt = llm.calls[1][0]
    assert second_prompt == flat.input_ids[:len(second_prompt)]
    assert second_prompt[-len(traj.turns[0].observation_ids):] == traj.turns[0].observation_ids


def test_openai_backend_through_the_loop_with_a_retry(toy_task: Task) -> None:
    def respond(body, n):
        if n == 1:
            return 500, {"error": "overloaded"}, {}
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        name, args = FIX_CALLS[min(turn, len(FIX_CALLS) - 1)]
        call = {"id": f"call{turn}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return 200, completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"), {}

    with chat_server(respond) as (url, seen):
        llm = OpenAIBackend(url, "remote-model", backoff=0.01)
        traj = collect(llm, [toy_task.instance_id], quiet(toy_task))[0]
    assert traj.resolved and traj.stop_reason == "submitted"
    assert len(seen) == 3  # a 500, then one request per turn
    assert [t["function"]["name"] for t in seen[-1]["body"]["tools"]][-1] == "submit"
    tool_msg = seen[-1]["body"]["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call0"
    assert traj.metadata["ids"] == "absent" and traj.metadata["completion_tokens"] == 14
    assert traj.policy["model"] == "remote-model"


def test_a_dead_endpoint_masks_episodes_instead_of_failing_them(toy_task: Task) -> None:
    with chat_server(lambda body, n: (502, {"error": "bad gateway"}, {})) as (url, _):
        llm = OpenAIBackend(url, "m", backoff=0.0, max_retries=1)
        traj = collect(llm, [toy_task.instance_id], quiet(toy_task))[0]
    assert traj.masked and traj.stop_reason.startswith("error: generation failed")
    assert traj.verdict["status"] == "no_verdict"


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    def ep(task: str, status: str) -> EpisodeResult:
        return EpisodeResult(task, status, 1, 0.0, 0.0, 0)

    episodes = [ep("a", "resolved"), ep("a", "unresolved"), ep("a", "unresolved"), ep("b", "unresolved"),
                ep("b", "unresolved"), ep("b", "unresolved")]
    got = pass_at_k(episodes, 3)
    assert got["1"] == pytest.approx((1 / 3 + 0) / 2)
    assert got["2"] == pytest.approx((1 - 1 / 3 + 0) / 2)  # 1 - C(2,2)/C(3,2)
    assert got["3"] == pytest.approx(0.5)


def test_parquet_export_keeps_the_token_view(toy_task: Task, tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from deepgym_agents.export import to_parquet

    trajs = collect(ScriptedLLM(FIX_SCRIPT, build_tokenizer()), [toy_task.instance_id],
                    CollectConfig(env_kwargs=env_kwargs(toy_task), k=2, show_progress=False))
    assert to_parquet(trajs, tmp_path / "t.parquet") == 2
    table = pq.read_table(tmp_path / "t.parquet").to_pylist()
    assert table[0]["input_ids"] == trajs[0].flatten().input_ids
    assert table[0]["loss_mask"] == trajs[0].flatten().loss_mask and table[0]["resolved"] is True


@pytest.mark.slow
def test_deepgym_eval_with_a_tiny_local_model(toy_jsonl, tmp_path, monkeypatch) -> None:
    from deepgym_envs.cli import main

    model_dir = write_tiny_model(tmp_path / "tiny", hidden=32)
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["eval", "--agent", "hf", "--model", str(model_dir), "--tasks", str(toy_jsonl), "--k", "2",
                   "--max-steps", "2", "--max-tokens", "8", "--concurrency", "2", "--sandbox", SANDBOX])
    assert rc == 0
    [results] = list((tmp_path / "leaderboard" / "results").glob("hf-tiny-toy-*.json"))
    data = json.loads(results.read_text())
    assert {"agent", "task_set", "env_id", "backend", "created_at", "machine", "summary", "episodes", "model"} <= set(data)
    s = data["summary"]
    assert s["k"] == 2 and set(s["pass_at_k"]) == {"1", "2"} and s["episodes"] == 2 and s["tasks"] == 1
    assert s["tokens"] == sum(e["tokens"] for e in data["episodes"]) > 0
    assert sorted(e["rollout_index"] for e in data["episodes"]) == [0, 1]
    run_dir = tmp_path / "leaderboard" / "runs" / results.stem
    [pred] = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert set(pred) == {"instance_id", "model_name_or_path", "model_patch"} and pred["instance_id"] == "toy__calc-001"
    assert len(list(read_trajectories(run_dir / "trajectories.jsonl"))) == 2
