"""A transformers backend (CPU or GPU): batched sampling that returns token ids and logprobs.

It decodes with its own small loop over the model's KV cache rather than ``model.generate`` so the
ids, the logprobs and the stopping rules are exactly the ones recorded: each row stops on its own
at the end-of-turn token, a stop string or ``max_tokens``.

>>> llm = HFBackend.from_pretrained("/tmp/tiny-model")          # doctest: +SKIP
>>> llm = HFBackend(model=policy_module, tokenizer=tok)          # share the trainer's module
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from deepgym_agents.llm import Generation, SamplingParams, per_prompt, require
from deepgym_envs.errors import DeepgymError


class HFBackend:
    def __init__(self, model: Any, tokenizer: Any = None, *, model_name: str | None = None,
                 max_batch_size: int = 16) -> None:
        """
        Args:
            model: a causal LM module (``AutoModelForCausalLM``); used as is, so a trainer can share it.
            tokenizer: its tokenizer, with a chat template; loaded from the model's path when None.
            max_batch_size: prompts decoded together at most (bounds padding memory).
        """
        if tokenizer is None:
            path = getattr(getattr(model, "config", None), "_name_or_path", "")
            if not path:
                raise DeepgymError("HFBackend needs a tokenizer when the model has no path to load one from")
            tokenizer = require("transformers", "the hf backend").AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name or getattr(getattr(model, "config", None), "_name_or_path", "") or "hf-model"
        self.max_batch_size = max_batch_size
        self.eos_ids = _eos_ids(tokenizer, model)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @classmethod
    def from_pretrained(cls, path: str, *, device: str | None = None, dtype: str = "auto", **kwargs: Any) -> "HFBackend":
        torch = require("torch", "the hf backend")
        transformers = require("transformers", "the hf backend")
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            # Built-in architectures only: a model folder's own Python (auto_map) is never imported.
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=False).to(device)
        except OSError as exc:
            raise DeepgymError(f"cannot load a model from {path!r}: {exc} "
                               "(a tiny local one: python -m deepgym_agents.tiny_model DIR)") from None
        return cls(model, tokenizer, model_name=kwargs.pop("model_name", path), **kwargs)

    def generate(self, prompts: list[list[int]], params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        plist = per_prompt(params, len(prompts))
        out: list[Generation] = []
        for start in range(0, len(prompts), self.max_batch_size):
            out += self._batch(prompts[start:start + self.max_batch_size], plist[start:start + self.max_batch_size])
        return out

    def update_weights(self, state_dict: dict[str, Any]) -> None:
        """Load new weights (names as in ``model.state_dict()``); a shared module needs no call."""
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        if unexpected:
            raise DeepgymError(f"update_weights: {len(unexpected)} unknown tensors, e.g. {unexpected[:3]}")

    # -- decoding --------------------------------------------------------------------------------
    def _batch(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[Generation]:
        torch = require("torch", "the hf backend")
        device = next(self.model.parameters()).device
        b, width = len(prompts), max(len(p) for p in prompts)
        # Left padding, so every row's next token sits in the last column. (B, T)
        ids = torch.full((b, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(device), mask.to(device)
        gens = [_sampler(torch, p, device) for p in params]
        completions: list[list[int]] = [[] for _ in prompts]
        logps: list[list[float]] = [[] for _ in prompts]
        finish = ["length"] * b
        done = [p.max_tokens <= 0 for p in params]
        with self._inference(torch):
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
            for _ in range(max(p.max_tokens for p in params)):
                if all(done):
                    break
                logits = out.logits[:, -1, :].float()                       # (B, V)
                raw_logp = torch.log_softmax(logits, dim=-1)                 # (B, V)
                nxt = torch.full((b,), self.pad_id, dtype=torch.long, device=device)
                for i in range(b):
                    if done[i]:
                        continue
                    tok = _sample(torch, logits[i], params[i], gens[i])
                    nxt[i] = tok
                    completions[i].append(tok)
                    logps[i].append(float(raw_logp[i, tok]))
                    done[i], reason = self._stopped(completions[i], params[i])
                    if reason:
                        finish[i] = reason
                mask = torch.cat([mask, torch.ones((b, 1), dtype=torch.long, device=device)], dim=1)
                positions = positions[:, -1:] + 1
                out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=positions,
                                 past_key_values=out.past_key_values, use_cache=True)
        return [Generation(c, lp, self.tokenizer.decode(c, skip_special_tokens=True), f)
                for c, lp, f in zip(completions, logps, finish)]

    def _stopped(self, completion: list[int], p: SamplingParams) -> tuple[bool, str]:
        if completion[-1] in self.eos_ids:
            return True, "stop"
        if p.stop:
            tail = self.tokenizer.decode(completion[-32:], skip_special_tokens=False)
            if any(s in tail for s in p.stop):
                return True, "stop"
        if len(completion) >= p.max_tokens:
            return True, "length"
        return False, ""

    @contextlib.contextmanager
    def _inference(self, torch: Any) -> Iterator[None]:
        """Eval mode and no autograd while sampling; a shared training module gets its mode back."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                yield
        finally:
            self.model.train(was_training)


def _eos_ids(tokenizer: Any, model: Any) -> list[int]:
    ids = set()
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
    if im_end is not None:
        ids.add(im_end)
    if not ids:
        raise DeepgymError("the tokenizer has no eos token: the model could never end its turn")
    return sorted(ids)


def _sampler(torch: Any, p: SamplingParams, device: Any) -> Any:
    if p.seed is None:
        return None
    gen = torch.Generator(device=device)
    gen.manual_seed(p.seed)
    return gen


def _sample(torch: Any, logits: Any, p: SamplingParams, gen: Any) -> int:
    """One token from (V,) logits with temperature and nucleus (top-p) filtering."""
    if p.temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / p.temperature, dim=-1)
    if p.top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < p.top_p  # the smallest prefix whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=gen))
