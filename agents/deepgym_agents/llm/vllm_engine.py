"""The vLLM offline engine (``vllm.LLM``) as a token-in/token-out backend. Needs a CUDA GPU.

Prompts go in as ``TokensPrompt`` ids, so vLLM never re-tokenises; prefix caching is on, so the
shared history of a multi-turn episode is computed once, not once per turn. Each request asks for
the sampled token's logprob only (``logprobs=0``), under the raw model distribution.

For RL, the trainer pushes new weights with :meth:`VLLMBackend.update_weights` (the model
runner's ``load_weights``; the prefix cache is dropped because its keys no longer match the
weights), and can free the GPU between rollouts with :meth:`sleep` / :meth:`wake_up`.

>>> llm = VLLMBackend("Qwen/Qwen2.5-Coder-7B-Instruct", gpu_memory_utilization=0.5)   # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from deepgym_agents.llm import Generation, SamplingParams, per_prompt, require
from deepgym_envs.errors import DeepgymError


class VLLMBackend:
    def __init__(self, model: str, *, tokenizer: Any = None, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.85, enable_sleep_mode: bool = False, seed: int = 0,
                 dtype: str = "auto", **engine_kwargs: Any) -> None:
        """
        Args:
            model: a model path or hub id.
            max_model_len: the context length the engine reserves KV cache for.
            gpu_memory_utilization: fraction of GPU memory vLLM may take (leave room for a trainer).
            enable_sleep_mode: allow :meth:`sleep` (offload weights, free the KV cache).
            engine_kwargs: anything else ``vllm.LLM`` takes (``tensor_parallel_size``, ...).
        """
        vllm = require("vllm", "the vllm backend")
        # In-process engine core, so update_weights can reach the model runner directly.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self._vllm = vllm
        self.engine = vllm.LLM(model=model, tokenizer=tokenizer if isinstance(tokenizer, str) else None,
                               enable_prefix_caching=True, max_model_len=max_model_len,
                               gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=enable_sleep_mode,
                               seed=seed, dtype=dtype, **engine_kwargs)
        self.tokenizer = tokenizer if tokenizer is not None and not isinstance(tokenizer, str) \
            else self.engine.get_tokenizer()
        self.model_name = model
        self.asleep = False

    def generate(self, prompts: list[list[int]], params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        if self.asleep:
            raise DeepgymError("the vLLM engine is asleep: call wake_up() before generating")
        inputs = require("vllm.inputs", "the vllm backend")
        requests = [inputs.TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        sampling = [self._sampling(p) for p in per_prompt(params, len(prompts))]
        outputs = self.engine.generate(requests, sampling, use_tqdm=False)
        gens = []
        for out in outputs:
            best = out.outputs[0]
            ids = list(best.token_ids)
            logps = [float(step[tok].logprob) for tok, step in zip(ids, best.logprobs or [])]
            if len(logps) != len(ids):
                raise DeepgymError(f"vLLM returned {len(logps)} logprobs for {len(ids)} tokens")
            finish = "length" if best.finish_reason == "length" else "stop"
            gens.append(Generation(ids, logps, self.tokenizer.decode(ids, skip_special_tokens=True), finish))
        return gens

    def _sampling(self, p: SamplingParams) -> Any:
        return self._vllm.SamplingParams(max_tokens=p.max_tokens, temperature=p.temperature, top_p=p.top_p,
                                         stop=p.stop or None, seed=p.seed, logprobs=0,
                                         include_stop_str_in_output=True, skip_special_tokens=True)

    def update_weights(self, state_dict: dict[str, Any]) -> None:
        """Load a trainer's weights (HF parameter names) into the running engine."""
        model = _runner_model(self.engine)
        model.load_weights(weights=list(state_dict.items()))
        self.engine.reset_prefix_cache()  # cached KV blocks were computed by the old weights

    def sleep(self, level: int = 1) -> None:
        """Free the GPU for a training step (level 1 keeps weights in CPU memory)."""
        self.engine.sleep(level=level)
        self.asleep = True

    def wake_up(self) -> None:
        self.engine.wake_up()
        self.asleep = False


def _runner_model(engine: Any) -> Any:
    """The torch module inside the engine; its path moved between vLLM versions."""
    executor = engine.llm_engine.model_executor
    worker = executor.driver_worker
    for path in ("worker.model_runner.model", "model_runner.model"):
        obj = worker
        try:
            for name in path.split("."):
                obj = getattr(obj, name)
            return obj
        except AttributeError:
            continue
    raise DeepgymError("cannot reach vLLM's model runner for update_weights: run with "
                       "VLLM_ENABLE_V1_MULTIPROCESSING=0 and a single GPU, or a vLLM version that exposes it")
