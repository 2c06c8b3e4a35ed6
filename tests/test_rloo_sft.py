"""SFT from trajectories: oracle demonstrations recorded as the loop records a model, the loss on
generated tokens only, ``deepgym train --sft``, and the reduced SWE-v0 learning chain (slow)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from conftest import NAMESPACE_OK  # noqa: E402
from deepgym_agents.baselines import PatchOracle  # noqa: E402
from deepgym_agents.config import CollectConfig  # noqa: E402
from deepgym_agents.demos import record_demonstrations  # noqa: E402
from deepgym_agents.llm import SamplingParams  # noqa: E402
from deepgym_agents.llm.scripted import ScriptedLLM  # noqa: E402
from deepgym_agents.loop import collect  # noqa: E402
from deepgym_agents.rloo.config import TrainConfig  # noqa: E402
from deepgym_agents.rloo.metrics import read_metrics  # noqa: E402
from deepgym_agents.rloo.trainer import RLOOTrainer  # noqa: E402
from deepgym_agents.tiny_model import build_model, build_tokenizer, write_tiny_model  # noqa: E402
from deepgym_agents.trajectory import read_trajectories  # noqa: E402
from deepgym_envs.cli import main  # noqa: E402
from deepgym_envs.tasks import load_tasks  # noqa: E402

SANDBOX = "namespace" if NAMESPACE_OK else "local"
TASK = "deepgym__tmplite-002"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='local'")


def demo_config(**overrides) -> CollectConfig:
    settings = dict(env_kwargs={"toolset": "bash", "sandbox": SANDBOX}, max_steps=3,
                    params=SamplingParams(max_tokens=640), show_progress=False)
    settings.update(overrides)
    return CollectConfig(**settings)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One oracle-patch demonstration of TASK, in the tiny model's ids, and its file."""
    path = tmp_path_factory.mktemp("demos") / "demos.jsonl"
    task = next(t for t in load_tasks("builtin") if t.instance_id == TASK)
    [traj] = record_demonstrations("oracle-patch", [task], build_tokenizer(), demo_config(out=path))
    return traj, path


def test_a_demonstration_is_what_the_loop_records_for_a_model_writing_the_same_text(demo):
    traj, path = demo
    assert traj.resolved and traj.stop_reason == "submitted" and len(traj.turns) == 2
    assert traj.metadata["ids"] == "complete" and traj.metadata["template_match"] is True
    [from_file] = list(read_trajectories(path))
    assert from_file.flatten() == traj.flatten()
    # A scripted model that writes the oracle's actions, run by agents.loop.collect: the same ids, same mask
    task = next(t for t in load_tasks("builtin") if t.instance_id == TASK)
    oracle = PatchOracle(task)
    script = [oracle.act("", {}), oracle.act("", {})]
    [looped] = collect(ScriptedLLM(script, build_tokenizer()), [TASK], demo_config())
    assert looped.resolved
    assert looped.flatten().input_ids == traj.flatten().input_ids
    assert looped.flatten().loss_mask == traj.flatten().loss_mask
    tok = build_tokenizer()
    assert tok.decode(traj.turns[0].completion_ids, skip_special_tokens=True) == script[0]
    assert traj.turns[0].completion_ids[-1] == tok.eos_token_id  # a model ends its turn with eos


def test_deepgym_eval_records_oracle_demonstrations_in_the_policy_tokenizer(tmp_path, capsys):
    out = tmp_path / "demos.jsonl"
    argv = ["eval", "--agent", "oracle-patch", "--task-ids", TASK, "--toolset", "bash", "--sandbox", SANDBOX,
            "--record-trajectories", str(out)]
    assert main(argv) != 0 and "--tokenizer tiny" in capsys.readouterr().out
    assert main(argv + ["--tokenizer", "tiny"]) == 0
    [traj] = list(read_trajectories(out))
    assert traj.resolved and traj.policy["model"] == "agent:oracle-patch" and traj.metadata["ids"] == "complete"


def test_sft_puts_no_gradient_on_prompt_or_observation_targets(demo):
    traj, _ = demo
    tok = build_tokenizer()
    model = build_model(tok, hidden=32, seed=0)
    trainer = RLOOTrainer(model, tok, TrainConfig(device="cpu", lr=1e-3, show_progress=False))
    kept: list[torch.Tensor] = []

    def keep(module, inputs, output):
        output.retain_grad()
        kept.append(output)

    handle = trainer.model.lm_head.register_forward_hook(keep)
    try:
        metrics = trainer.sft_step([traj])
    finally:
        handle.remove()
    grad = kept[0].grad[0]                                    # (T, V): d loss / d logits
    mask = torch.tensor(traj.flatten().loss_mask)             # (T,)
    predicts_generated = torch.zeros_like(mask, dtype=torch.bool)
    predicts_generated[:-1] = mask[1:].bool()                 # logits at t predict token t + 1
    per_position = grad.abs().sum(-1)                         # (T,)
    assert torch.all(per_position[~predicts_generated] == 0)  # prompt / observation targets: no gradient
    assert torch.all(per_position[predicts_generated] > 0)
    assert metrics["train_tokens"] == int(predicts_generated.sum()) == sum(len(t.completion_ids) for t in traj.turns)


def test_deepgym_train_sft_lowers_the_loss_on_the_demonstrations(demo, tmp_path):
    _, path = demo
    model = write_tiny_model(tmp_path / "tiny", hidden=32)
    out = tmp_path / "sft"
    assert main(["train", "--sft", "--from", str(path), "--model", str(model), "--steps", "6", "--lr", "1e-2",
                 "--tasks-per-step", "1", "--device", "cpu", "--checkpoint-every", "0", "--no-show-progress",
                 "--out", str(out)]) == 0
    losses = [row["sft_loss"] for row in read_metrics(out / "metrics.jsonl")]
    assert len(losses) == 6 and losses[-1] < losses[0] * 0.8
    assert (out / "checkpoints" / "step-6" / "model.safetensors").exists()


def test_sft_refuses_a_file_with_nothing_to_imitate(demo, tmp_path):
    from deepgym_agents.rloo.config import TrainConfigError
    from deepgym_agents.rloo.sft import train_sft

    traj, _ = demo
    traj = type(traj).from_dict(traj.to_dict())
    traj.verdict = {"status": "unresolved"}
    bad = tmp_path / "failed.jsonl"
    bad.write_text(traj.to_json() + "\n")
    with pytest.raises(TrainConfigError, match="none of its 1 trajectories"):
        train_sft(TrainConfig(model="tiny", steps=1, device="cpu", out=str(tmp_path / "run")), bad)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # ~10 min alone on 2 cores: SFT 300 steps, 2 x 64 evaluation episodes, 12 RL steps
def test_sft_then_turn_level_rloo_raises_the_resolve_rate_on_the_training_tasks(tmp_path):
    """The reduced learning chain of bench/bench_swe_learning.py (minutes on 2 cores): oracle-patch
    and no-op episodes of two tasks, SFT of the tiny model from scratch on both (it opens with either
    about equally often), 12 steps (8 rollouts per task) of turn-level RLOO on process rewards
    through agents.loop.collect and real sandboxes; 16 sampled episodes per task before and after."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "bench_swe_learning.py"
    spec = importlib.util.spec_from_file_location("bench_swe_learning", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = bench.parser().parse_args(["--arms", "turn_process", "--rl-steps", "12", "--eval-k", "16", "--seed", "0",
                                      "--device", "cpu", "--sandbox", SANDBOX, "--out", str(tmp_path)])
    result = bench.run(args)
    assert result["sft"]["loss_last"] < 0.1 * result["sft"]["loss_first"]
    start, arm = result["sft"]["train_resolve"], result["arms"]["turn_process"]
    assert 0.0 < start < 1.0  # the warm start solves some episodes, not all: there is room to learn
    # what the reward teaches: the no-op opening, half the SFT policy's first moves, dies out
    opening = arm["opens_with_submit"]
    assert len(opening) == 12 and sum(opening[-4:]) / 4 < 0.5 * opening[0]
    assert arm["train_resolve"] > start
    assert len(arm["curve"]) == 12 and Path(arm["png"]).exists()
