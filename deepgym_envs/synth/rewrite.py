"""Optional: reword a synthesised problem statement with an LLM, so it reads like a person wrote it.

Any OpenAI-compatible endpoint (``vllm serve``, a hosted API) through the client the audit's
LLM attackers use. The model sees only the template statement — never the patch — and its
answer is discarded (the template kept) when it is empty, loses the reproduction, or quotes a
line of the fix.
"""

from __future__ import annotations

from deepgym_envs.errors import DeepgymError
from deepgym_envs.openai_http import ChatClient

SYSTEM_PROMPT = """You rewrite bug reports. Given a terse, machine-written report about a Python
library, write it as a GitHub issue a user would file: a one-line title, what they were doing,
the reproduction code block unchanged, what happened and what they expected. Do not guess at the
cause or at where in the library the bug is, and do not suggest a fix. Answer with the issue only."""


def rewrite_statement(client: ChatClient, statement: str, fix: str) -> str:
    """The LLM's rewording of ``statement``, or ``statement`` itself when the answer is unusable."""
    try:
        answer = client.chat([{"role": "system", "content": SYSTEM_PROMPT},
                              {"role": "user", "content": statement}]).strip()
    except DeepgymError:
        return statement
    if not answer or len(answer) > 4 * len(statement) + 2000:
        return statement
    if "```python" in statement and _code_block(statement) not in answer:
        return statement  # the reproduction must survive verbatim
    if any(line in answer for line in _fix_lines(fix)):
        return statement
    return answer.rstrip() + "\n"


def _code_block(text: str) -> str:
    start = text.index("```python") + len("```python")
    return text[start:text.index("```", start)].strip()


def _fix_lines(patch: str) -> list[str]:
    """Changed lines of the fix, long enough that quoting them would point at the bug."""
    lines = [line[1:].strip() for line in patch.splitlines()
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return [line for line in lines if len(line) >= 8]
