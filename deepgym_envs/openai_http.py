"""The one HTTP client for OpenAI-compatible ``/chat/completions`` endpoints (stdlib only).

vLLM, llama.cpp and hosted APIs all speak it. Two callers share it: the audit's attackers and task
synthesis use :class:`OpenAIChatClient` (messages in, reply text out), and the agent loop's
``deepgym_agents.llm.openai_client.OpenAIBackend`` posts its own bodies (tools, logprobs, vLLM's token-id
fields) through :class:`ChatCompletions`.

Failures: 429, 5xx, timeouts, refused and reset connections are retried with exponential backoff
(``backoff`` seconds, then twice that, ...; a ``Retry-After`` header lengthens a wait, at most to a
minute) and become :class:`InfrastructureError` once the retries are spent; a 400 saying the prompt
is over the context length is :class:`ContextTooLong`; any other 4xx is a :class:`DeepgymError` at
once (a wrong model name or key will not fix itself).

>>> client = OpenAIChatClient("http://localhost:8000/v1", "Qwen/Qwen2.5-Coder-7B-Instruct")  # doctest: +SKIP
>>> client.chat([{"role": "user", "content": "hello"}])                                      # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any, Protocol

from deepgym_envs.errors import DeepgymError, InfrastructureError

_CONTEXT_ERROR = re.compile(r"context length|context_length|maximum context|too long|max_model_len", re.I)
_MAX_RETRY_AFTER = 60.0


class ContextTooLong(DeepgymError):
    """The server refused the prompt as longer than its context; ``detail`` is what it said."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(f"{url} answered HTTP 400: {detail[:500]} (the prompt is over the model's context)")
        self.detail = detail


class ChatCompletions:
    """POSTs JSON bodies to ``{base_url}/chat/completions`` and returns the decoded answer.

    Args:
        base_url: up to ``/v1``, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``; ``""`` sends none.
        timeout: seconds per request attempt.
        max_retries: attempts after the first for retryable failures.
        backoff: seconds before the first retry, doubled each time.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0,
                 max_retries: int = 3, backoff: float = 1.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.requests = 0
        """Attempts made (retries included)."""

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
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
                    raise InfrastructureError(f"{self.url} answered a malformed chat completion "
                                              f"(not JSON): {raw[:300]!r}") from None
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:1000].decode(errors="replace")
                if exc.code == 400 and _CONTEXT_ERROR.search(detail):
                    raise ContextTooLong(self.url, detail) from None
                if exc.code != 429 and exc.code < 500:
                    raise DeepgymError(f"{self.url} answered HTTP {exc.code}: {detail[:500]} "
                                       "(check the base URL, the model name and OPENAI_API_KEY)") from None
                last = f"HTTP {exc.code}: {detail[:300]}"
                delay = max(delay, _retry_after(exc.headers.get("Retry-After")))
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < self.max_retries:
                time.sleep(delay)
                delay *= 2
        raise InfrastructureError(f"{self.url} failed after {self.max_retries + 1} tries; last: {last}")


def _retry_after(value: str | None) -> float:
    try:
        return min(float(value), _MAX_RETRY_AFTER) if value else 0.0
    except ValueError:
        return 0.0


class ChatClient(Protocol):
    """Anything that turns chat messages into the assistant's reply."""

    def chat(self, messages: list[dict[str, str]]) -> str: ...


class OpenAIChatClient:
    """A :class:`ChatClient` over :class:`ChatCompletions`: messages in, the reply's text out."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60,
                 max_retries: int = 3, *, temperature: float = 0.7, max_tokens: int = 4096,
                 backoff: float = 1.0) -> None:
        self.http = ChatCompletions(base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
                                    backoff=backoff)
        self.model = model
        self.temperature, self.max_tokens = temperature, max_tokens

    def chat(self, messages: list[dict[str, str]]) -> str:
        payload = self.http.post({"model": self.model, "messages": messages, "temperature": self.temperature,
                                  "max_tokens": self.max_tokens})
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise InfrastructureError(f"malformed chat completion: {json.dumps(payload)[:300]}") from None
        return content or ""


__all__ = ["ChatClient", "ChatCompletions", "ContextTooLong", "OpenAIChatClient"]
