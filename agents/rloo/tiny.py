"""Tiny policies built in code (random init, no downloads): a word-level tokenizer and a causal LM.

They are real ``transformers`` objects, so the trainer, the checkpoints and ``save_pretrained`` work
on them exactly as on a downloaded model — only small enough to train from scratch on a CPU.

>>> tok = word_tokenizer(["up", "down", "at", "0", "1"])
>>> model = tiny_causal_lm(len(tok), seed=0)                      # doctest: +SKIP
"""

from __future__ import annotations

from typing import Iterable

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def word_tokenizer(words: Iterable[str]):
    """A ``PreTrainedTokenizerFast`` with one id per word (split on whitespace) plus the specials."""
    from tokenizers import Tokenizer
    from tokenizers.decoders import WordPiece
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for word in (*SPECIALS, *words):
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = WhitespaceSplit()
    core.decoder = WordPiece(prefix="##")  # joins words with spaces, which is all a word-level vocabulary needs
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<bos>", eos_token="<eos>")


def tiny_causal_lm(vocab_size: int, *, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4,
                   max_positions: int = 256):
    """A randomly initialised Llama-architecture causal LM with ``vocab_size`` tokens."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_positions, tie_word_embeddings=True,
                         pad_token_id=0, bos_token_id=2, eos_token_id=3)
    with torch.random.fork_rng(devices=[]):  # seeded weights without touching the caller's RNG
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)
