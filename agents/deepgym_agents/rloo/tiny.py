"""The trainer's tiny policies: a word-level tokenizer and a causal LM built in code (random init,
no downloads), small enough to train from scratch on a CPU. :mod:`deepgym_agents.tiny_model` builds them.

>>> tok = word_tokenizer(["up", "down", "at", "0", "1"])
>>> model = tiny_causal_lm(len(tok), seed=0)                      # doctest: +SKIP
"""

from __future__ import annotations

from deepgym_agents.tiny_model import WORD_SPECIALS as SPECIALS
from deepgym_agents.tiny_model import tiny_causal_lm, word_tokenizer

__all__ = ["SPECIALS", "tiny_causal_lm", "word_tokenizer"]
