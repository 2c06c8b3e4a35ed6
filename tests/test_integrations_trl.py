"""TRL's real GRPOTrainer takes training steps on DeepGym episodes run in real sandboxes
(deepgym_agents.integrations.trl): through rollout_func on the reference loop, and through
environment_factory with TRL's own tool loop."""

from __future__ import annotations


import threading

import pytest

from tests._readme import readme_snippet
from tests._fixtures import needs_namespace




pytest.importorskip("trl")
torch = pytest.importorskip("torch")

TASK = "deepgym__tmplite-001"
OLD, NEW = "if len(text) < length:", "if len(text) <= length:"
FIX = f"sed -i 's/{OLD}/{NEW}/' src/tmplite/filters.py"

#: The README's "Use with TRL" snippet, run as is (test_readme_snippet_trains_the_tiny_model).
README_SNIPPET = '''
from trl import GRPOConfig, GRPOTrainer
from deepgym_agents.config import CollectConfig
from deepgym_agents.integrations.trl import DeepGymRollout, episode_return, rollout_dataset
from deepgym_agents.llm import SamplingParams
from deepgym_agents.tiny_model import build_model, build_tokenizer

tokenizer = build_tokenizer()              # a tiny random model built here; any causal LM works
model = build_model(tokenizer)
rollout = DeepGymRollout(CollectConfig(env_id="deepgym/SWE-Bash-v0", max_steps=2,
                                       params=SamplingParams(max_tokens=24)))
trainer = GRPOTrainer(
    model=model, processing_class=tokenizer, reward_funcs=[episode_return], rollout_func=rollout,
    train_dataset=rollout_dataset(["deepgym__tmplite-001"]),   # each prompt is a task id
    args=GRPOConfig(output_dir="runs/grpo-tiny", per_device_train_batch_size=2, num_generations=2, max_steps=1,
                    use_cpu=True, report_to="none", save_strategy="no", gradient_checkpointing=False))
trainer.train()
rollout.close()
'''


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")


def _config(tmp_path, **overrides):
    from trl import GRPOConfig

    kwargs = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_steps=1,
                  learning_rate=1e-2, use_cpu=True, report_to="none", save_strategy="no", logging_steps=1,
                  max_completion_length=64, gradient_checkpointing=False)
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


def _tiny():
    from deepgym_agents.tiny_model import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    return tokenizer, build_model(tokenizer, seed=0)


def _weights(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _fix_once_script():
    """The first episode to start fixes the bug and submits; every other one submits at once. Within
    one GRPO group that gives rewards 1 and 0: a nonzero advantage, so the step must move the weights."""
    from deepgym_agents.base import tool_call

    lock, started = threading.Lock(), []

    def script(turn: int, prompt_text: str) -> str:
        if turn == 0:
            with lock:
                started.append(1)
                first = len(started) == 1
            if first:
                return tool_call("bash", command=FIX)
        return tool_call("submit")
    return script


@pytest.mark.slow
@needs_namespace
def test_rollout_func_step_trains_on_engine_ids_and_moves_the_weights(tmp_path):
    from trl import GRPOTrainer

    from deepgym_agents.config import CollectConfig
    from deepgym_agents.integrations.trl import DeepGymRollout, episode_return, outcome, rollout_dataset
    from deepgym_agents.llm.scripted import ScriptedLLM

    tokenizer, model = _tiny()
    seen = {}

    def recording_outcome(completions, verdict, turn_rewards, **kwargs):
        seen.update(verdict=list(verdict), turn_rewards=list(turn_rewards))
        return outcome(completions, verdict, **kwargs)

    rollout = DeepGymRollout(CollectConfig(env_id="deepgym/SWE-Bash-v0", max_steps=4, concurrency=2),
                             llm=lambda trainer: ScriptedLLM(_fix_once_script(), tokenizer=trainer.processing_class))
    handed = []  # what TRL got back from the rollout function

    def recording_rollout(prompts, trainer):
        handed.append(rollout(prompts, trainer))
        return handed[-1]

    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[episode_return, recording_outcome],
                          rollout_func=recording_rollout, train_dataset=rollout_dataset([TASK]), args=_config(tmp_path))
    before = _weights(trainer.model)
    try:
        trainer.train()
    finally:
        rollout.close()
    trajs = rollout.trajectories
    assert sorted(seen["verdict"]) == ["resolved", "unresolved"]
    fixed = next(t for t in trajs if t.resolved)
    assert len(fixed.turns) == 2 and seen["turn_rewards"][trajs.index(fixed)] == fixed.rewards
    # what TRL trained on: the loop's ids, the environment's tokens masked out
    i, flat = trajs.index(fixed), fixed.flatten()
    (out,) = handed
    assert out["prompt_ids"][i] == fixed.turns[0].prompt_ids
    assert out["prompt_ids"][i] + out["completion_ids"][i] == flat.input_ids
    assert out["env_mask"][i] == flat.loss_mask[len(out["prompt_ids"][i]):] and 0 in out["env_mask"][i]
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[name], after[name].detach()) for name in before)
    assert trainer.state.global_step == 1


@pytest.mark.slow
@needs_namespace
def test_readme_snippet_trains_the_tiny_model(tmp_path, monkeypatch):
    """The trainer's own model generates (HFBackend on the unwrapped module): real ids and logprobs."""
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(readme_snippet("### TRL (`GRPOTrainer`)", README_SNIPPET), "README.md (TRL)", "exec"), namespace)
    trainer, rollout = namespace["trainer"], namespace["rollout"]
    assert trainer.state.global_step == 1
    trajs = rollout.trajectories
    assert len(trajs) == 2 and all(t.verdict and t.verdict["status"] == "unresolved" for t in trajs)
    for traj in trajs:  # ids from the engine, with its logprobs; the tiny model never solves it
        assert traj.metadata["ids"] == "complete" and traj.turns
        logps = [lp for turn in traj.turns for lp in turn.completion_logprobs]
        assert logps and all(lp <= 0.0 for lp in logps) and any(lp < 0.0 for lp in logps)


def test_masked_and_empty_episodes_carry_no_signal():
    from deepgym_agents.integrations.trl import episode_return, outcome, to_trl
    from deepgym_agents.trajectory import Trajectory, Turn

    ok = Trajectory("t", turns=[Turn([5, 6], [7, 8], [-0.1, -0.2], observation_ids=[9], reward=1.0)],
                    verdict={"status": "resolved"}, episode_return=1.0, metadata={"ids": "complete"})
    failed = Trajectory("t", turns=[Turn([5, 6], [7], [-0.3], observation_ids=[9])], masked=True,
                        verdict={"status": "no_verdict"}, metadata={"ids": "complete"})
    died = Trajectory("t", masked=True, verdict={"status": "no_verdict"})
    out = to_trl([ok, failed, died], pad_id=0)
    assert out["prompt_ids"] == [[5, 6], [5, 6], [0]]
    assert out["completion_ids"] == [[7, 8, 9], [7, 9], [0]]
    assert out["env_mask"] == [[1, 1, 0], [0, 0], [0]]
    assert out["logprobs"] == [[-0.1, -0.2, 0.0], [-0.3, 0.0], [0.0]]
    assert episode_return(None, out["episode_return"], out["masked"]) == [1.0, None, None]
    assert outcome(None, out["verdict"]) == [1.0, None, None]
    chat_only = Trajectory("t", turns=[Turn([], [7], [0.0])], metadata={"ids": "completion_only"})
    with pytest.raises(Exception, match="token"):
        to_trl([chat_only], pad_id=0)


@needs_namespace
def test_environment_factory_tools_grade_with_the_hidden_tests():
    from deepgym_agents.integrations.trl import SWEBashTools, SWETools

    env = SWETools()
    try:
        assert "truncate" in env.reset(task_id=TASK, prompt=[])
        assert NEW not in env.view("src/tmplite/filters.py")
        env.edit("str_replace", "src/tmplite/filters.py", old_str=OLD, new_str=NEW)
        assert env.submit() == "submitted" and env.get_reward() > 0.5
        assert "episode is over" in env.bash("ls")
        env.reset(task_id=TASK)
        env.bash("true")
        assert env.get_reward() <= 0.0  # never submitted: graded as it stands, unresolved
    finally:
        SWEBashTools.close_all()


@needs_namespace
def test_environment_factory_step_through_trl_tool_loop(tmp_path):
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from deepgym_agents.integrations.trl import SWEBashTools, environment_dataset

    tokenizer, model = _tiny()
    tokenizer.response_template = qwen3_template  # the tiny template writes Hermes/Qwen tool calls
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, environment_factory=SWEBashTools.factory(),
                          train_dataset=environment_dataset([TASK]), args=_config(tmp_path, max_completion_length=16))
    try:
        assert sorted(t.__name__ for t in trainer.tools) == ["bash", "submit"]
        trainer.train()
        assert trainer.state.global_step == 1
        envs = trainer.environments
        assert len(envs) == 2 and all(e._env.unwrapped.task.instance_id == TASK for e in envs)
        # get_reward graded every rollout (the random model never submits; the final state is unresolved)
        assert all(e._verdict and e._verdict["status"] == "unresolved" for e in envs)
    finally:
        SWEBashTools.close_all()
