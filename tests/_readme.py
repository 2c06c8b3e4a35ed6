"""The README's code blocks, for tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_blocks(heading: str, fallback: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(language, code) of each fenced block in README.md's section ``heading`` (up to the next heading),
    or ``fallback`` (the same blocks, held by the test) while the README has no such section."""
    text = README.read_text(encoding="utf-8") if README.is_file() else ""
    start = next((m.end() for m in re.finditer(r"^#+ (.*)$", text, re.M) if m.group(1).strip() == heading), None)
    if start is None:
        return fallback
    end = re.search(r"^#+ ", text[start:], re.M)
    section = text[start:start + end.start()] if end else text[start:]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w+)\n(.*?)^```", section, re.M | re.S)]
