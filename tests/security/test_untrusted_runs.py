"""A run folder from someone else is data: ``deepgym train --resume`` on it never unpickles code.

The trainer state was ``torch.load(weights_only=False)``: a ``trainer_state.pt`` whose pickle names
a callable ran it on the host as the user. Now the state is JSON plus safetensors; an old ``.pt``
is read by torch's ``weights_only`` unpickler (tensors and plain containers only), and the weights
of a checkpoint load from safetensors only.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from deepgym_agents.rloo.config import TrainConfig  # noqa: E402
from deepgym_agents.rloo.tiny import tiny_causal_lm, word_tokenizer  # noqa: E402
from deepgym_agents.rloo.trainer import RLOOTrainer  # noqa: E402
from deepgym_envs.cli import main  # noqa: E402
from deepgym_envs.gridnav import VOCABULARY  # noqa: E402

GRID = ["--env-id", "deepgym/GridNav-v0", "--k", "2", "--tasks-per-step", "1", "--no-show-progress",
        "--device", "cpu"]


class Planted:
    """Pickles as a call to ``exec``: unpickling it writes ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('the pickle ran')",)


def tiny_trainer(seed: int = 0) -> RLOOTrainer:
    tok = word_tokenizer(VOCABULARY)
    model = tiny_causal_lm(len(tok), seed=seed, hidden=16, layers=1, heads=2)
    return RLOOTrainer(model, tok, TrainConfig(device="cpu", seed=seed))


def take_a_step(trainer: RLOOTrainer) -> None:
    """Some optimiser state to save (Adam moments, step counts), without rollouts."""
    loss = sum((p.float() ** 2).sum() for p in trainer.model.parameters() if p.requires_grad)
    loss.backward()
    trainer.optimizer.step()
    trainer.steps_done, trainer.updates = 5, 9


def old_style_run(run: Path, planted: dict[str, object]) -> Path:
    """A run folder as the previous code wrote it (``save_pretrained`` + ``trainer_state.pt``)."""
    trainer = tiny_trainer()
    take_a_step(trainer)
    ckpt = run / "checkpoints" / "step-1"
    ckpt.mkdir(parents=True)
    trainer.model.save_pretrained(ckpt)
    trainer.tokenizer.save_pretrained(ckpt)
    state = {"step": 1, "updates": 1, "optimizer": trainer.optimizer.state_dict(), "steps_done": 1,
             "torch_rng": torch.random.get_rng_state(), "rng": random.Random(0).getstate(), "extra": {}}
    state.update(planted)
    torch.save(state, ckpt / "trainer_state.pt")
    return ckpt


def test_a_trainer_state_pickle_that_names_code_is_refused_and_never_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    run = tmp_path / "their-run"
    old_style_run(run, {"extra": {"note": Planted(marker)}})
    code = main(["train", "--online", *GRID, "--steps", "2", "--resume", "--out", str(run)])
    out = capsys.readouterr().out
    assert not marker.exists(), "unpickling the run folder's trainer state ran its code"
    assert code == 2 and "refusing to load" in out and "trainer_state.pt" in out, out
    assert not (run / "checkpoints" / "step-2").exists()


def test_an_old_honest_trainer_state_still_resumes(tmp_path):
    """Runs written before the JSON format resume (through the weights-only unpickler)."""
    run = tmp_path / "old-run"
    old_style_run(run, {})
    assert main(["train", "--online", *GRID, "--steps", "2", "--resume", "--out", str(run)]) == 0
    assert (run / "checkpoints" / "step-2" / "trainer_state.json").is_file()


def test_pickled_weights_in_a_checkpoint_are_not_loaded(tmp_path, capsys):
    marker = tmp_path / "pwned"
    run = tmp_path / "their-run"
    ckpt = old_style_run(run, {})
    (ckpt / "model.safetensors").unlink()
    torch.save({"model.embed_tokens.weight": Planted(marker)}, ckpt / "pytorch_model.bin")
    code = main(["train", "--online", *GRID, "--steps", "2", "--resume", "--out", str(run)])
    out = capsys.readouterr().out
    assert not marker.exists()
    assert code == 2 and "model.safetensors" in out, out


def test_an_honest_checkpoint_round_trips_without_pickle(tmp_path):
    trainer = tiny_trainer()
    take_a_step(trainer)
    trainer.rng.random()
    extra = {"note": "after warm-up", "window": (3, 4.5), 7: [None, True]}
    saved = trainer.save(tmp_path / "checkpoints" / "step-3", step=3, extra=extra)
    for path in saved.iterdir():  # every file is JSON or safetensors: nothing to unpickle
        head = path.read_bytes()[:2]
        assert path.suffix in (".json", ".safetensors"), path.name
        assert head not in (b"PK", b"\x80\x02", b"\x80\x04", b"\x80\x05"), path.name

    fresh = tiny_trainer(seed=1)
    state = fresh.load_state(saved)
    assert state["step"] == 3 and state["extra"] == extra
    assert (fresh.steps_done, fresh.updates) == (5, 9)
    want, got = trainer.optimizer.state_dict(), fresh.optimizer.state_dict()
    assert got["param_groups"] == want["param_groups"]
    assert want["state"] and got["state"].keys() == want["state"].keys()
    for pid, moments in want["state"].items():
        for name, value in moments.items():
            assert torch.equal(got["state"][pid][name], value), (pid, name)
    assert fresh.rng.random() == trainer.rng.random()  # the sampler of minibatches continues where it was


def test_a_state_file_that_does_not_fit_says_so(tmp_path, capsys):
    trainer = tiny_trainer()
    saved = trainer.save(tmp_path / "run" / "checkpoints" / "step-1", step=1)
    doc = json.loads((saved / "trainer_state.json").read_text())
    doc["state"]["torch_rng"] = {"__tensor__": "t999"}
    (saved / "trainer_state.json").write_text(json.dumps(doc))
    code = main(["train", "--online", *GRID, "--steps", "2", "--resume", "--out", str(tmp_path / "run")])
    assert code == 2 and "t999" in capsys.readouterr().out
