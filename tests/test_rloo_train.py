"""The RLOO loops end to end on GridNav with a tiny policy: collector, CLI, checkpoints, resume, plots."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from deepgym_agents.rloo.cli import config_from_args  # noqa: E402
from deepgym_agents.rloo.collect import DirectCollector  # noqa: E402
from deepgym_agents.rloo.online import make_collector  # noqa: E402
from deepgym_agents.rloo.metrics import read_metrics  # noqa: E402
from deepgym_agents.rloo.tiny import tiny_causal_lm, word_tokenizer  # noqa: E402
from deepgym_agents.trajectory import append_trajectories, read_trajectories  # noqa: E402
from deepgym_envs.cli import build_parser, main  # noqa: E402
from deepgym_envs.gridnav import VOCABULARY, gridnav_tasks  # noqa: E402

GRID = ["--env-id", "deepgym/GridNav-v0", "--k", "4", "--tasks-per-step", "3", "--lr", "1e-3", "--no-show-progress"]


@pytest.fixture
def policy():
    tok = word_tokenizer(VOCABULARY)
    return tiny_causal_lm(len(tok), seed=0, hidden=32, layers=1, heads=2), tok


@pytest.mark.parametrize("flags, penalty", [([], 0.05), (["--invalid-action-penalty", "0.5"], 0.5)])
def test_the_trainers_reward_config_is_the_one_the_environment_pays_by(policy, flags, penalty):
    model, tok = policy
    config = config_from_args(build_parser().parse_args(["train", "--online", *GRID, *flags]))
    trajs = make_collector(config, model, tok).collect([t.instance_id for t in gridnav_tasks()[:2]], 2)
    paid = {turn.reward_components["invalid_action"] for traj in trajs for turn in traj.turns}
    assert paid == {0.0, -penalty}  # an untrained policy makes moves and non-moves alike


def test_direct_collector_records_what_was_sampled(policy):
    model, tok = policy
    tasks = [t.instance_id for t in gridnav_tasks()[:2]]
    trajs = DirectCollector(model, tok, seed=3).collect(tasks, 3, policy_version=7)
    assert [t.task_id for t in trajs] == [tasks[0]] * 3 + [tasks[1]] * 3
    assert len({t.group_id for t in trajs}) == 2 and [t.rollout_index for t in trajs[:3]] == [0, 1, 2]
    for traj in trajs:
        assert traj.verdict["status"] in ("resolved", "unresolved") and traj.policy["version"] == 7
        assert traj.episode_return == pytest.approx(sum(traj.rewards))
        flat = traj.flatten()
        generated = [i for i, m in zip(flat.input_ids, flat.loss_mask) if m]
        assert generated == [t.completion_ids[0] for t in traj.turns]  # one token per move, nothing else
        # the recorded logprob is the model's, at the position it was sampled
        ids = torch.tensor([flat.input_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0], -1)
        pos = [p for p, m in enumerate(flat.loss_mask) if m]
        recomputed = [float(logp[p - 1, flat.input_ids[p]]) for p in pos]
        assert recomputed == pytest.approx([flat.behavior_logprobs[p] for p in pos], abs=1e-4)
    again = DirectCollector(model, tok, seed=3).collect(tasks, 3)
    assert [t.flatten().input_ids for t in again] == [t.flatten().input_ids for t in trajs]  # seeded


def test_cli_online_resume_offline_and_plot(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--online", *GRID, "--steps", "2", "--checkpoint-every", "1", "--out", str(run)]) == 0
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("reward_mean", "resolved_rate", "all_pass_frac", "all_fail_frac", "kl", "entropy", "clip_frac",
                "gen_tokens_per_s", "env_time", "gen_time", "train_time", "rollout_time"):
        assert key in rows[0], key
    assert (run / "checkpoints" / "step-1").is_dir() and (run / "checkpoints" / "step-2" / "config.json").exists()
    assert json.loads((run / "config.json").read_text())["lr"] == 1e-3

    # resume: continues at step 3 from the step-2 weights and optimiser state
    assert main(["train", "--online", *GRID, "--steps", "3", "--resume", "--out", str(run)]) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3]

    # offline: trajectories from a file, the saved checkpoint as the model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = run / "checkpoints" / "step-3"
    model, tok = AutoModelForCausalLM.from_pretrained(ckpt), AutoTokenizer.from_pretrained(ckpt)
    data = tmp_path / "trajectories.jsonl"
    tasks = [t.instance_id for t in gridnav_tasks()[:4]]
    append_trajectories(data, DirectCollector(model, tok, seed=1).collect(tasks, 4))
    assert len(list(read_trajectories(data))) == 16
    off = tmp_path / "offline"
    assert main(["train", "--from", str(data), "--model", str(ckpt), "--steps", "2", "--tasks-per-step", "2",
                 "--lr", "1e-3", "--no-show-progress", "--out", str(off)]) == 0
    assert len(read_metrics(off / "metrics.jsonl")) == 2 and (off / "checkpoints" / "step-2").is_dir()

    assert main(["plot-run", str(run)]) == 0
    png = (run / "curves.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_cli_rejects_a_bad_config_with_a_message(tmp_path, capsys):
    assert main(["train", "--online", *GRID, "--k", "1", "--out", str(tmp_path)]) == 2
    assert "at least 2 rollouts" in capsys.readouterr().out
    assert main(["train", "--from", str(tmp_path / "none.jsonl"), "--out", str(tmp_path)]) == 2
    assert "no trajectory file" in capsys.readouterr().out
    assert main(["train", "--online", "--model", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "not a model directory" in capsys.readouterr().out
