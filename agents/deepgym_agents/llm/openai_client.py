"""An OpenAI-compatible ``/chat/completions`` client (stdlib only) for the agent loop.

Works against ``vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hermes`` and any
provider. A remote server owns the tokenizer, so this is a :class:`deepgym_agents.llm.ChatLLM`: it takes
messages and tool schemas, returns the assistant message (text or ``tool_calls``), and returns
token ids only when the server reports them:

* vLLM with ``vllm_extras=True``: asks for ``return_token_ids`` (prompt and completion ids, newer
  vLLM) and ``return_tokens_as_token_ids`` (logprob entries named ``token:<id>``);
* any server with ``logprobs=True``: the sampled tokens' logprobs, but usually no ids.

Requests go through :class:`deepgym_envs.openai_http.ChatCompletions` (retries of 429, 5xx,
timeouts and refused connections with exponential backoff honouring ``Retry-After``; other 4xx
fail at once). A prompt longer than the server's context becomes ``finish_reason="context_length"``;
a request that still fails after the retries becomes ``finish_reason="error"`` for that
conversation only. Given the served model's tokenizer and ``max_context``, the backend counts each
prompt itself: one that leaves no room is ``context_length`` without a request, and ``max_tokens``
is capped to the room left (the server's own context may be larger than the one asked for).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from deepgym_agents.llm import Generation, SamplingParams, per_prompt
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.openai_http import ChatCompletions, ContextTooLong


class OpenAIBackend:
    tokenizer = None

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 300.0,
                 max_retries: int = 4, backoff: float = 1.0, max_concurrency: int = 16, logprobs: bool = True,
                 vllm_extras: bool = False, tokenizer: Any = None, max_context: int = 0) -> None:
        """
        Args:
            base_url: up to ``/v1``, e.g. ``http://127.0.0.1:8000/v1``.
            api_key: sent as a bearer token; default ``$OPENAI_API_KEY``.
            timeout: seconds per request attempt.
            max_retries: attempts after the first for retryable failures.
            backoff: seconds before the first retry, doubled each time.
            max_concurrency: requests in flight at once (the provider's rate limit, politely).
            logprobs: ask for the sampled tokens' logprobs.
            vllm_extras: ask a vLLM server for token ids too (other servers may reject the fields).
            tokenizer: the served model's tokenizer (a transformers tokenizer with its chat template,
                or a name or path to load one from), to hold prompts within ``max_context``.
            max_context: context length in tokens (prompt + completion); 0 = the server's.
        """
        if max_context and tokenizer is None:
            raise DeepgymError("--max-context with the openai backend needs --tokenizer (the served model's), "
                               "to count prompt tokens")
        if not base_url:
            raise DeepgymError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        self.http = ChatCompletions(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                                    backoff=backoff)
        self.model_name = model
        self.max_concurrency = max_concurrency
        self.logprobs, self.vllm_extras = logprobs, vllm_extras
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        # Not ``self.tokenizer``: that names a token-mode LLM to the loop, and this one stays a ChatLLM.
        self.context_tokenizer, self.max_context = tokenizer, max_context

    @property
    def requests(self) -> int:
        """Attempts made (retries included)."""
        return self.http.requests

    def chat(self, conversations: list[list[dict[str, Any]]], tools: list[dict[str, Any]] | None,
             params: SamplingParams | Sequence[SamplingParams]) -> list[Generation]:
        plist = per_prompt(params, len(conversations))
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(conversations)))) as pool:
            return list(pool.map(lambda a: self._one(*a, tools), zip(conversations, plist)))

    def _one(self, messages: list[dict[str, Any]], p: SamplingParams, tools: list[dict[str, Any]] | None) -> Generation:
        body: dict[str, Any] = {"model": self.model_name, "messages": messages, "max_tokens": p.max_tokens,
                                "temperature": p.temperature, "top_p": p.top_p}
        if tools:
            body["tools"] = tools
        if p.stop:
            body["stop"] = p.stop
        if p.seed is not None:
            body["seed"] = p.seed
        if self.logprobs:
            body["logprobs"] = True
        if self.vllm_extras:
            body.update(return_token_ids=True, return_tokens_as_token_ids=True, include_stop_str_in_output=True)
        if self.max_context:
            used = self.prompt_tokens(messages, tools)
            if used >= self.max_context:
                return Generation([], [], f"the prompt's {used} tokens fill --max-context {self.max_context}",
                                  "context_length")
            body["max_tokens"] = min(p.max_tokens, self.max_context - used)
        try:
            return _generation(self.http.post(body))
        except ContextTooLong as exc:
            return Generation([], [], exc.detail, "context_length")
        except InfrastructureError as exc:
            return Generation([], [], str(exc), "error")


    def prompt_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        """Tokens the chat template makes of ``messages`` and ``tools``, generation prompt included."""
        ids = self.context_tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                                         tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return len(ids)


def _generation(payload: dict[str, Any]) -> Generation:
    try:
        choice = payload["choices"][0]
        message = dict(choice["message"])
    except (KeyError, IndexError, TypeError):
        raise InfrastructureError(f"malformed chat completion: {json.dumps(payload)[:300]}") from None
    finish = choice.get("finish_reason") or "stop"
    finish = "length" if finish == "length" else "stop"  # "tool_calls" and "stop" both end the turn
    entries = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = [float(e.get("logprob", 0.0)) for e in entries]
    ids = choice.get("token_ids")
    if ids is None and entries and all(str(e.get("token", "")).startswith("token:") for e in entries):
        ids = [int(e["token"][len("token:"):]) for e in entries]
    if ids is None or (logprobs and len(ids) != len(logprobs)):
        ids, logprobs = [], []  # ids unknown: logprobs alone cannot be placed on tokens
    elif not logprobs:
        logprobs = [0.0] * len(ids)  # ids without logprobs: a trainer must recompute them
    usage = (payload.get("usage") or {}).get("completion_tokens")
    return Generation(list(ids), logprobs, message.get("content") or "", finish, message=message,
                      prompt_ids=payload.get("prompt_token_ids"), num_tokens=usage if isinstance(usage, int) else None)
