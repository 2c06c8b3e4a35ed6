"""SWE-bench-style task sets stored by Hugging Face ``datasets`` (or as Parquet / Arrow files).

For people who have SWE-bench, SWE-Gym or SWE-smith on disk: a directory written by
``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, or ``.parquet`` / ``.arrow`` files as the
Hub serves them. ``datasets`` is used when it is installed (and imported only then); otherwise
the files are read with ``pyarrow`` directly. Rows become :class:`~deepgym_envs.tasks.Task` through
the same checks as JSONL rows, so a malformed row names its file, row number and field. A
dataset row may not name a path on this machine (``repo_path``): it runs in its image.

>>> tasks = load_tasks("~/data/SWE-Gym-Lite")            # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from deepgym_envs.errors import TaskFormatError

_SUFFIXES = (".parquet", ".arrow")


def is_dataset(path: Path) -> bool:
    """A ``save_to_disk`` directory, a directory of Parquet/Arrow files, or one such file."""
    if path.is_file():
        return path.suffix in _SUFFIXES
    if not path.is_dir():
        return False
    if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
        return True
    return any(p.suffix in _SUFFIXES for p in path.rglob("*") if p.is_file())


def dataset_rows(path: Path, split: str | None = None) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(file, row number from 1, row as JSONL would have it) for every row (all splits, or one)."""
    for source, index, row in _rows(path, split):
        yield source, index + 1, _plain(row)


def _rows(path: Path, split: str | None) -> Iterator[tuple[str, int, dict[str, Any]]]:
    if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        try:
            import datasets  # noqa: F401 - optional
        except ImportError:
            pass
        else:
            yield from _rows_with_datasets(path, split)
            return
    for file in _files(path, split):
        for i, row in enumerate(_read_table(file).to_pylist()):
            yield str(file), i, row


def _rows_with_datasets(path: Path, split: str | None) -> Iterator[tuple[str, int, dict[str, Any]]]:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    parts = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
    for name, ds in parts:
        if split and name and name != split:
            continue
        for i, row in enumerate(ds):
            yield f"{path}[{name}]" if name else str(path), i, row


def _files(path: Path, split: str | None) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES and not p.name.startswith("cache-"))
    if split:
        files = [f for f in files if split in f.relative_to(path).parts or f.name.startswith(f"{split}-")]
    if not files:
        raise TaskFormatError(str(path), None, None, "no .parquet or .arrow files" + (f" for split {split!r}" if split else ""))
    return files


def _read_table(file: Path) -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskFormatError(str(file), None, None, "reading Parquet/Arrow task files needs pyarrow "
                              "(pip install pyarrow, or pip install datasets)") from None
    if file.suffix == ".parquet":
        return pq.read_table(file)
    # `save_to_disk` writes Arrow IPC *stream* files; plain Arrow files are the IPC file format.
    try:
        with pa.memory_map(str(file)) as source:
            return pa.ipc.open_stream(source).read_all()
    except pa.ArrowInvalid:
        with pa.memory_map(str(file)) as source:
            return pa.ipc.open_file(source).read_all()


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """Arrow rows may carry list/struct values where SWE-bench JSONL has JSON text; JSONL has None as ''."""
    out = {}
    for key, value in row.items():
        if key in ("FAIL_TO_PASS", "PASS_TO_PASS", "test_cmd", "flaky") and isinstance(value, str):
            out[key] = value  # JSON text, decoded by task_from_row
        elif isinstance(value, (bytes, bytearray)):
            out[key] = value.decode("utf-8", "replace")
        elif isinstance(value, dict) and key != "python_env":
            out[key] = json.loads(json.dumps(value, default=str))
        else:
            out[key] = value
    return out
