"""The learning proof: turn-level RLOO takes a random-init tiny transformer from chance to ≥ 80 %
success on deepgym/GridNav-v0, on a CPU, within a fixed and seeded budget (150 steps × 64 episodes)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from deepgym_agents.rloo.online import load_policy, train_online  # noqa: E402
from deepgym_agents.rloo.recipes import gridnav_config, success_rate  # noqa: E402


@pytest.fixture
def one_thread():
    """Tiny matrices: threads only add synchronisation (and noise on a shared 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_policy_learns_gridnav_from_scratch(tmp_path, one_thread):
    config = gridnav_config(seed=0, out=str(tmp_path / "run"), show_progress=False)
    model, tokenizer = load_policy(config)
    chance = success_rate(model, tokenizer)
    trainer = train_online(config)
    learned = success_rate(trainer.model, tokenizer)
    assert chance <= 0.05, f"an untrained policy should rarely reach the goal, got {chance:.0%}"
    assert learned >= 0.8, f"after {config.steps} steps the policy resolves only {learned:.0%}"
