"""Why each candidate and each project came to nothing, on disk, one command away.

Per project ``NAME-VERSION``, under the output directory:

- ``logs/NAME-VERSION/``: the baseline runs, the output of every rejected candidate's test run,
  each failed validation, a failed build (plain text, the last lines of long output);
- ``rejects/NAME-VERSION.jsonl``: one record per rejected candidate: stage, reason, bug kind,
  function, failing tests, and the log's path relative to the output directory;
- ``NAME-VERSION.rejected``: the tasks that failed validation, as rows (their base commits stay
  in the repository), so ``deepgym tasks validate OUT/NAME-VERSION.rejected`` re-runs the check.

``rejects/`` sits one level down and ``.rejected`` is not ``.jsonl``: loading ``OUT`` as a task
set still finds only the tasks that passed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_LOG_LINES = 400


class Recorder:
    """Logs and reject records of one project."""

    def __init__(self, out: Path, name: str) -> None:
        self.out, self.name = out, name
        self.log_dir = out / "logs" / name
        self.rejects_file = out / "rejects" / f"{name}.jsonl"
        self.rejected_rows_file = out / f"{name}.rejected"
        for path in (self.rejects_file, self.rejected_rows_file):
            path.unlink(missing_ok=True)  # a rerun into the same directory starts these afresh
        self.count = 0

    def log(self, label: str, text: str) -> str:
        """Write ``text`` (its last lines) to ``logs/NAME/label.txt``; return that path, relative to the output."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        lines = text.splitlines()
        if len(lines) > _LOG_LINES:
            lines = [f"[... {len(lines) - _LOG_LINES} earlier lines left out ...]", *lines[-_LOG_LINES:]]
        path = self.log_dir / f"{_safe(label)}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return str(path.relative_to(self.out))

    def reject(self, stage: str, reason: str, *, log: str = "", **fields: Any) -> None:
        self.rejects_file.parent.mkdir(parents=True, exist_ok=True)
        record = {"project": self.name, "stage": stage, "reason": reason, **fields, "log": log}
        with self.rejects_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        self.count += 1

    def rejected_row(self, row: dict[str, Any]) -> None:
        with self.rejected_rows_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:120]
