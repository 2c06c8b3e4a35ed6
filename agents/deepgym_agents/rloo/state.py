"""Trainer state on disk without pickle: tensors in safetensors, everything else in JSON.

A run folder may be someone else's (``deepgym train --resume`` on a run that was downloaded or
shared), and unpickling a file runs whatever callable it names. So the optimiser state, the RNG
states, the step counters and ``extra`` are written as ``trainer_state.json`` (plain data, each
tensor replaced by a reference) beside ``trainer_state.safetensors`` (the tensors); reading them
parses two formats that can only describe data.

Checkpoints written before this format hold ``trainer_state.pt``; it is read with torch's
``weights_only`` unpickler, which accepts tensors and plain containers and refuses every other
callable a pickle names.

>>> write_state(directory, {"step": 3, "optimizer": optimizer.state_dict()})   # doctest: +SKIP
>>> read_state(directory)["step"]                                              # doctest: +SKIP
3
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import torch

from deepgym_envs.errors import DeepgymError

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
LEGACY_STATE = "trainer_state.pt"
FORMAT = 1

# One-key objects that stand for what JSON cannot say; a dict of the user's with such a key, or
# with keys that are not strings, is written as an item list so it can never be mistaken for one.
_TENSOR, _TUPLE, _ITEMS = "__tensor__", "__tuple__", "__items__"


class CheckpointError(DeepgymError):
    """A checkpoint's trainer state is missing, malformed or in a form that is not loaded."""


def has_state(directory: str | Path) -> bool:
    directory = Path(directory)
    return (directory / STATE_JSON).is_file() or (directory / LEGACY_STATE).is_file()


def write_state(directory: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` (tensors, numbers, strings, None, lists, tuples, dicts) into ``directory``."""
    from safetensors.torch import save_file

    directory = Path(directory)
    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(state, tensors)
    save_file(tensors, str(directory / STATE_TENSORS))
    (directory / STATE_JSON).write_text(json.dumps({"format": FORMAT, "state": tree}))


def read_state(directory: str | Path) -> dict[str, Any]:
    """The state :func:`write_state` wrote (tensors on the CPU); nothing in the files is executed."""
    directory = Path(directory)
    if (directory / STATE_JSON).is_file():
        return _read_json_state(directory)
    if (directory / LEGACY_STATE).is_file():
        return _read_legacy(directory / LEGACY_STATE)
    raise CheckpointError(f"{directory} holds no trainer state ({STATE_JSON}); "
                          "resume from a checkpoints/step-N folder that deepgym train wrote")


def _read_json_state(directory: Path) -> dict[str, Any]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        with _open_regular(directory / STATE_JSON) as fh:
            doc = json.loads(fh.read().decode("utf-8"))
        with _open_regular(directory / STATE_TENSORS) as fh:
            # The descriptor's own path: the file checked is the file read, never a FIFO or a link.
            tensors = load_file(f"/proc/self/fd/{fh.fileno()}", device="cpu")
    except RecursionError:
        raise CheckpointError(f"cannot read the trainer state in {directory}: JSON nested too deeply") from None
    except (OSError, UnicodeDecodeError, ValueError, SafetensorError) as exc:  # ValueError: JSON, 4300+ digits
        raise CheckpointError(f"cannot read the trainer state in {directory}: {str(exc)[:300]}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("state"), dict):
        raise CheckpointError(f"{directory / STATE_JSON} is not a format-{FORMAT} trainer state")
    return _decode(doc["state"], tensors, directory)


def _open_regular(path: Path):
    """``path`` opened for reading when it is a regular file (no link followed, no FIFO waited on)."""
    from deepgym_envs.errors import ToolError
    from deepgym_envs.sandbox.base import open_regular

    try:
        return open_regular(str(path), os.O_RDONLY, str(path))
    except ToolError as exc:
        raise CheckpointError(f"cannot read the trainer state: {exc}") from None


def _read_legacy(path: Path) -> dict[str, Any]:
    try:
        with _open_regular(path) as fh:
            state = torch.load(fh, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"refusing to load {path}: it is a pickle that names code, not only tensors and plain data "
            f"(unpickling it could run that code). Resume only from checkpoints written by deepgym train. "
            f"Details: {str(exc).splitlines()[0]}") from None
    except (OSError, RuntimeError, EOFError) as exc:
        raise CheckpointError(f"cannot read the trainer state {path}: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} does not hold a trainer state (a dict)")
    return state


def _encode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        name = f"t{len(tensors)}"
        # clone(): safetensors refuses tensors that share storage (views of one buffer)
        tensors[name] = value.detach().to("cpu").contiguous().clone()
        return {_TENSOR: name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, tensors) for v in value]}
    if isinstance(value, list):
        return [_encode(v, tensors) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not {_TENSOR, _TUPLE, _ITEMS} & value.keys():
            return {k: _encode(v, tensors) for k, v in value.items()}
        return {_ITEMS: [[_encode(k, tensors), _encode(v, tensors)] for k, v in value.items()]}
    raise CheckpointError(f"cannot save a {type(value).__name__} in the trainer state: "
                          "only tensors, numbers, strings, None, lists, tuples and dicts are written")


def _decode(value: Any, tensors: dict[str, torch.Tensor], where: Path) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors, where) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and _TENSOR in value:
        if value[_TENSOR] not in tensors:
            raise CheckpointError(f"{where / STATE_JSON} names a tensor {value[_TENSOR]!r} "
                                  f"that {STATE_TENSORS} does not hold")
        return tensors[value[_TENSOR]]
    if len(value) == 1 and _TUPLE in value and isinstance(value[_TUPLE], list):
        return tuple(_decode(v, tensors, where) for v in value[_TUPLE])
    if len(value) == 1 and _ITEMS in value and isinstance(value[_ITEMS], list):
        items = [_decode(pair, tensors, where) for pair in value[_ITEMS]]
        if not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise CheckpointError(f"{where / STATE_JSON}: malformed item list")
        try:
            return {k: v for k, v in items}
        except TypeError:  # an unhashable key (a list): no state of ours has one
            raise CheckpointError(f"{where / STATE_JSON}: unhashable dict key") from None
    return {k: _decode(v, tensors, where) for k, v in value.items()}
