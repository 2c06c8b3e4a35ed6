"""The README's code blocks, for tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_blocks(heading: str, fallback: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(language, code) of each fenced block in README.md's section ``heading`` (up to the next heading;
    a ``# comment`` inside a code block is not one), or ``fallback`` (the same blocks, held by the
    test) while the README has no such section."""
    text = README.read_text(encoding="utf-8") if README.is_file() else ""
    blocks: list[tuple[str, str]] = []
    inside, lang, code, found = False, "", [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if inside and found:
                blocks.append((lang, "".join(code)))
            inside, lang, code = not inside, line[3:].strip(), []
        elif inside:
            code.append(line)
        elif (m := re.match(r"^#+ (.*)$", line)):
            if found:
                break
            found = m.group(1).strip() == heading
    return blocks if found else fallback


def readme_snippet(heading: str, fallback: str, fence: str = "python") -> str:
    """The first ``fence`` block of README.md's section ``heading`` (leading ``#`` optional), or
    ``fallback`` (the same code, held by the test) while the README has no such block: an installed
    wheel ships no README."""
    blocks = [code for lang, code in readme_blocks(heading.lstrip("# ").strip(), []) if lang == fence]
    return blocks[0] if blocks else fallback
