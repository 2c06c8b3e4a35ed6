"""An OpenAI-compatible ``/chat/completions`` client (stdlib only) for the agent loop.

Works against ``vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hermes`` and any
provider. A remote server owns the tokenizer, so this is a :class:`agents.llm.ChatLLM`: it takes
messages and tool schemas, returns the assistant message (text or ``tool_calls``), and returns
token ids only when the server reports them:

* vLLM with ``vllm_extras=True``: asks for ``return_token_ids`` (prompt and completion ids, newer
  vLLM) and ``return_tokens_as_token_ids`` (logprob entries named ``token:<id>``);
* any server with ``logprobs=True``: the sampled tokens' logprobs, but usually no ids.

Failures: 429, 5xx, timeouts and refused connections are retried with exponential backoff
(honouring ``Retry-After``); other 4xx fail at once (a wrong model name will not fix itself); a
prompt longer than the server's context becomes ``finish_reason="context_length"``; a request that
still fails after the retries becomes ``finish_reason="error"`` for that conversation only.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from agents.llm import Generation, SamplingParams, per_prompt
from deepgym_envs.errors import DeepgymError, InfrastructureError

_CONTEXT_ERROR = re.compile(r"context length|context_length|maximum context|too long|max_model_len", re.I)


class OpenAIBackend:
    tokenizer = None

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 300.0,
                 max_retries: int = 4, backoff: float = 1.0, max_concurrency: int = 16, logprobs: bool = True,
                 vllm_extras: bool = False) -> None:
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
        """
        if not base_url:
            raise DeepgymError("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model_name = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.max_concurrency = max_concurrency
        self.logprobs, self.vllm_extras = logprobs, vllm_extras
        self.requests = 0
        """Attempts made (retries included)."""

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
        try:
            return _generation(self._post(body))
        except InfrastructureError as exc:
            return Generation([], [], str(exc), "error")
        except _ContextTooLong as exc:
            return Generation([], [], str(exc), "context_length")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        delay = self.backoff
        for attempt in range(self.max_retries + 1):
            self.requests += 1
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    raw = resp.read()
                try:
                    return json.loads(raw)
                except ValueError:
                    raise InfrastructureError(f"{self.url} answered something that is not JSON: {raw[:200]!r}") from None
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:1000].decode(errors="replace")
                if exc.code == 400 and _CONTEXT_ERROR.search(detail):
                    raise _ContextTooLong(detail) from None
                if exc.code != 429 and exc.code < 500:
                    raise DeepgymError(f"{self.url} answered HTTP {exc.code}: {detail} "
                                       "(check the base URL, the model name and OPENAI_API_KEY)") from None
                last = f"HTTP {exc.code}: {detail[:300]}"
                delay = max(delay, _retry_after(exc.headers.get("Retry-After")))
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < self.max_retries:
                time.sleep(delay)
                delay *= 2
        raise InfrastructureError(f"{self.url} failed after {self.max_retries + 1} tries; last: {last}")


class _ContextTooLong(Exception):
    pass


def _retry_after(value: str | None) -> float:
    try:
        return min(float(value), 60.0) if value else 0.0
    except ValueError:
        return 0.0


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
