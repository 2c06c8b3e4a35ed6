"""RLOO on deepgym/SWE-v0 through the reference agent loop, and the GPU paths (bf16, vLLM weight sync)."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("deepgym_agents.loop") is None:
    pytest.skip("deepgym_agents.loop (the agent loop branch) is not installed", allow_module_level=True)

import torch  # noqa: E402

from deepgym_agents.rloo.config import TrainConfig  # noqa: E402
from deepgym_agents.rloo.metrics import read_metrics  # noqa: E402
from deepgym_agents.rloo.online import load_policy, train_online  # noqa: E402
from deepgym_agents.trajectory import read_trajectories  # noqa: E402
from conftest import NAMESPACE_OK  # noqa: E402
from deepgym_envs.tasks import load_tasks  # noqa: E402

SANDBOX = "namespace" if NAMESPACE_OK else "local"
pytestmark = pytest.mark.filterwarnings("ignore:sandbox='local'")


def swe_config(tmp_path, **overrides) -> TrainConfig:
    from deepgym_agents.tiny_model import write_tiny_model

    model = write_tiny_model(tmp_path / "tiny", hidden=32)
    task = load_tasks("builtin")[0].instance_id
    # A random-init policy emits bytes, not tool calls: every rollout earns the same penalties and the
    # group has no reward variance. Keeping such groups lets the entropy term still move the weights,
    # so one iteration exercises rollout → advantages → loss → optimiser step → weight sync.
    settings = dict(model=str(model), env_id="deepgym/SWE-v0", tasks="builtin", task_ids=[task], sandbox=SANDBOX,
                    tasks_per_step=1, k=2, max_steps=2, max_new_tokens=24, steps=1, lr=1e-2, entropy_coef=0.01,
                    filter_zero_variance=False, checkpoint_every=0, device="cpu", show_progress=False,
                    out=str(tmp_path / "run"))
    settings.update(overrides)
    return TrainConfig.from_dict(settings)


@pytest.mark.slow
def test_one_online_iteration_on_a_builtin_task(tmp_path):
    config = swe_config(tmp_path)
    before = {n: p.detach().clone() for n, p in load_policy(config)[0].named_parameters()}
    trainer = train_online(config)
    [row] = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert row["episodes"] == 2 and row["groups"] == 1 and row["masked_episodes"] == 0
    assert row["train_sequences"] == 2 and row["train_tokens"] > 0 and row["grad_norm"] > 0
    assert 0.0 <= row["resolved_rate"] <= 1.0 and row["entropy"] > 0 and row["env_time"] > 0
    # the trainer's log-probs of the loop's token ids equal the engine's: the ids line up exactly
    assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-3) and row["clip_frac"] == 0.0
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n].detach()) for n in before)  # the optimiser step moved them
    trajs = list(read_trajectories(tmp_path / "run" / "trajectories.jsonl"))
    assert len(trajs) == 2 and all(t.turns and t.turns[0].completion_logprobs for t in trajs)
    assert (tmp_path / "run" / "checkpoints" / "step-1" / "config.json").exists()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_cuda
def test_bf16_training_step_on_gpu(tmp_path):
    config = swe_config(tmp_path, device="cuda", bf16=True, lora=True)
    trainer = train_online(config)
    assert next(trainer.model.parameters()).device.type == "cuda"
    assert read_metrics(tmp_path / "run" / "metrics.jsonl")[0]["grad_norm"] > 0


@pytest.mark.gpu
@needs_cuda
def test_vllm_engine_receives_the_trained_weights(tmp_path):
    pytest.importorskip("vllm")
    from deepgym_agents.llm import SamplingParams
    from deepgym_agents.llm.vllm_engine import VLLMBackend
    from deepgym_agents.rloo.collect import LoopCollector
    from deepgym_agents.rloo.trainer import RLOOTrainer

    config = swe_config(tmp_path, device="cuda")
    model, tok = load_policy(config)
    trainer = RLOOTrainer(model, tok, config)
    llm = VLLMBackend(config.model, gpu_memory_utilization=0.3)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    prompt = [tok(text, add_special_tokens=False).input_ids]
    params = SamplingParams(max_tokens=8, temperature=0.0)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)  # a visibly different policy
    collector = LoopCollector(llm)
    assert collector.sync(trainer.model) >= 0
    synced = llm.generate(prompt, params)[0]
    fresh = VLLMBackend(config.model, gpu_memory_utilization=0.3)
    assert synced.completion_ids != fresh.generate(prompt, params)[0].completion_ids


def test_each_training_batch_draws_fresh_samples(toy_task):
    """The online trainer's collector must not replay one batch's random draws in the next: with the
    loop's seeds fixed per episode index, every step sampled the same episodes from a policy that
    had barely moved, so RLOO saw the same few failures again and again."""
    from deepgym_agents.config import CollectConfig
    from deepgym_agents.llm import SamplingParams
    from deepgym_agents.llm.hf import HFBackend
    from deepgym_agents.rloo.collect import LoopCollector
    from deepgym_agents.tiny_model import build_model, build_tokenizer

    tok = build_tokenizer()
    llm = HFBackend(build_model(tok, hidden=32), tok, model_name="tiny")
    config = CollectConfig(env_kwargs={"tasks": [toy_task], "sandbox": SANDBOX}, max_steps=1,
                           params=SamplingParams(max_tokens=16, seed=7), show_progress=False)

    def completions(batch):
        return [tuple(t.turns[0].completion_ids) for t in batch]

    collector = LoopCollector(llm, config)
    first = completions(collector.collect([toy_task.instance_id], 2))
    second = completions(collector.collect([toy_task.instance_id], 2))
    assert len(set(first + second)) == 4  # the same weights, four different samples
    # still reproducible: a new collector with the same seed replays the same sequence of batches
    assert completions(LoopCollector(llm, config).collect([toy_task.instance_id], 2)) == first
