"""The OpenAI-compatible backend holds prompts within ``--max-context`` when it has the served
model's tokenizer: it caps ``max_tokens`` to the room left and answers ``context_length`` itself
when there is none (issue 15). A local endpoint stand-in and the tiny byte-level tokenizer."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from _chat_server import answers_in_turn, chat_server  # noqa: E402
from _loop_helpers import completion  # noqa: E402
from deepgym_agents.llm import SamplingParams  # noqa: E402
from deepgym_agents.llm.openai_client import OpenAIBackend  # noqa: E402
from deepgym_agents.tiny_model import build_tokenizer  # noqa: E402
from deepgym_envs.errors import DeepgymError  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "submit", "description": "done",
                                           "parameters": {"type": "object", "properties": {}}}}]


def test_max_tokens_is_capped_to_the_room_the_prompt_leaves():
    tokenizer = build_tokenizer()
    short = [{"role": "user", "content": "hi"}]
    with chat_server(answers_in_turn([(200, completion({"role": "assistant", "content": "ok"}))])) as (url, seen):
        llm = OpenAIBackend(url, "m", tokenizer=tokenizer, max_context=400, max_retries=0)
        used = llm.prompt_tokens(short, TOOLS)
        assert 0 < used < 400  # the byte-level tokenizer: one token per byte of the rendered template
        [gen] = llm.chat([short], TOOLS, SamplingParams(max_tokens=1000))
        assert gen.text == "ok"
        assert seen[0]["body"]["max_tokens"] == 400 - used
        [gen] = llm.chat([short], TOOLS, SamplingParams(max_tokens=5))
        assert seen[1]["body"]["max_tokens"] == 5  # a smaller request stands


def test_a_prompt_that_fills_the_context_is_context_length_without_a_request():
    with chat_server(answers_in_turn([(200, completion({"role": "assistant", "content": "ok"}))])) as (url, seen):
        llm = OpenAIBackend(url, "m", tokenizer=build_tokenizer(), max_context=100, max_retries=0)
        long = [{"role": "user", "content": "x" * 500}]
        [gen] = llm.chat([long], TOOLS, SamplingParams(max_tokens=10))
        assert gen.finish_reason == "context_length" and "--max-context 100" in gen.text
        assert seen == []  # never sent


def test_max_context_without_a_tokenizer_fails_at_construction():
    with pytest.raises(DeepgymError, match="needs --tokenizer"):
        OpenAIBackend("http://127.0.0.1:9/v1", "m", max_context=4096)
    assert OpenAIBackend("http://127.0.0.1:9/v1", "m").tokenizer is None  # still a chat (not token-mode) LLM


def test_the_audits_attacker_limits_are_options():
    from deepgym_envs.audit.cli import llm_attackers
    from deepgym_envs.cli import build_parser

    reply = completion({"role": "assistant", "content": "no patch"})
    with chat_server(answers_in_turn([(200, reply)])) as (url, seen):
        args = build_parser().parse_args(["audit", "--llm-url", url, "--llm-model", "m", "--tier", "3",
                                          "--llm-max-tokens", "77", "--llm-timeout", "5", "--llm-temperature", "0"])
        [(attacker, tier)] = llm_attackers(args)
        assert tier == 3 and attacker.client.http.timeout == 5.0
        assert attacker.propose("the task", []) == "no patch"
        assert seen[0]["body"]["max_tokens"] == 77 and seen[0]["body"]["temperature"] == 0.0
    defaults = build_parser().parse_args(["audit", "--llm-url", url, "--llm-model", "m"])
    [(attacker, _), _] = llm_attackers(defaults)
    assert attacker.client.max_tokens == 4096 and attacker.client.http.timeout == 60.0  # as before
    with pytest.raises(DeepgymError, match="positive"):
        llm_attackers(build_parser().parse_args(["audit", "--llm-url", url, "--llm-model", "m", "--llm-timeout", "0"]))
