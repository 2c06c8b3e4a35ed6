"""Plain helpers for the tools, env and CLI tests: a tiny self-contained task written to disk.

The task's repository is the *fixed* library; its base state is that library with the gold patch
reverse-applied (``gold_reverse_base``), so the agent starts with the bug. The hidden test patch
adds the test that decides it. Kept apart from ``conftest.py`` (which has its own toy task) so the
two never collide.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgym_envs.sandbox.namespace import available

NS_OK, NS_WHY = available()
needs_namespace = pytest.mark.skipif(not NS_OK, reason=f"namespace sandbox unavailable here: {NS_WHY}")

TASK_ID = "wordy__parity-001"

REPO_FILES = {
    "pyproject.toml": '[project]\nname = "wordy"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\n'
                      'pythonpath = ["src"]\ntestpaths = ["tests"]\n',
    "README.md": "wordy: small text and number helpers\n",
    "src/wordy/__init__.py": "from wordy.core import is_even, shout\n",
    "src/wordy/core.py": (
        "def shout(text):\n"
        "    \"\"\"Upper-case text and add an exclamation mark.\"\"\"\n"
        "    return text.upper() + \"!\"\n"
        "\n"
        "\n"
        "def is_even(n):\n"
        "    \"\"\"True when n is even.\"\"\"\n"
        "    return n % 2 == 0\n"
    ),
    "tests/test_core.py": (
        "from wordy import shout\n"
        "\n"
        "\n"
        "def test_shout():\n"
        "    assert shout(\"hi\") == \"HI!\"\n"
        "\n"
        "\n"
        "def test_shout_empty():\n"
        "    assert shout(\"\") == \"!\"\n"
    ),
}

#: The base state returns ``n % 2 == 1``: every answer of is_even is wrong.
BUGGY_LINE = "    return n % 2 == 1\n"
FIXED_LINE = "    return n % 2 == 0\n"

GOLD_PATCH = """diff --git a/src/wordy/core.py b/src/wordy/core.py
--- a/src/wordy/core.py
+++ b/src/wordy/core.py
@@ -5,4 +5,4 @@ def shout(text):
 
 def is_even(n):
     \"\"\"True when n is even.\"\"\"
-    return n % 2 == 1
+    return n % 2 == 0
"""

TEST_PATCH = """diff --git a/tests/test_core.py b/tests/test_core.py
--- a/tests/test_core.py
+++ b/tests/test_core.py
@@ -7,3 +7,8 @@ def test_shout():
 
 def test_shout_empty():
     assert shout("") == "!"
+
+
+def test_is_even():
+    from wordy import is_even
+    assert is_even(4) and not is_even(7)
"""

#: A "fix" that changes nothing about the bug: validation must reject a task carrying it.
NOT_A_FIX = """diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-wordy: small text and number helpers
+wordy: small text and number helpers (v2)
"""


def write_repo(root: Path) -> Path:
    for rel, text in REPO_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def task_row(**overrides: object) -> dict:
    row = {
        "instance_id": TASK_ID, "repo": "toy/wordy", "repo_path": "wordy", "base_commit": "",
        "gold_reverse_base": True, "difficulty": "easy",
        "problem_statement": "is_even(4) returns False and is_even(7) returns True; "
                             "they should be the other way round.",
        "patch": GOLD_PATCH, "test_patch": TEST_PATCH,
        "FAIL_TO_PASS": ["tests/test_core.py::test_is_even"],
        "PASS_TO_PASS": ["tests/test_core.py::test_shout", "tests/test_core.py::test_shout_empty"],
    }
    row.update(overrides)
    return row


def write_task_file(directory: Path, *rows: dict, name: str = "wordy.jsonl") -> Path:
    """The repository next to a JSONL file of ``rows`` (default: the one good task)."""
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "wordy").exists():
        write_repo(directory / "wordy")
    path = directory / name
    path.write_text("".join(json.dumps(r) + "\n" for r in (rows or (task_row(),))))
    return path


def tool(name: str, **arguments: object) -> str:
    """Hermes-style assistant text for one tool call."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
