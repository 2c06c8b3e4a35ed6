"""LLM backends: transformers sampling, the OpenAI-compatible client, scripted replay, vLLM (GPU)."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _chat_server import chat_server  # noqa: E402
from _loop_helpers import completion  # noqa: E402
from deepgym_agents.llm import Generation, SamplingParams, make_llm, require  # noqa: E402
from deepgym_agents.llm.hf import HFBackend  # noqa: E402
from deepgym_agents.llm.openai_client import OpenAIBackend  # noqa: E402
from deepgym_agents.llm.scripted import ScriptedLLM  # noqa: E402
from deepgym_agents.tiny_model import build_model, build_tokenizer, write_tiny_model  # noqa: E402
from deepgym_envs.errors import DeepgymError  # noqa: E402


@pytest.fixture(scope="module")
def tiny() -> HFBackend:
    tok = build_tokenizer()
    return HFBackend(build_model(tok, hidden=32), tok, model_name="tiny")


def test_hf_logprobs_are_the_models_own(tiny: HFBackend) -> None:
    """The recorded logprobs equal a teacher-forced forward pass over prompt + completion, rows of a
    left-padded batch included, so a trainer recomputing them sees ratio 1 at the start."""
    prompts = [tiny.tokenizer.encode("hello there", add_special_tokens=False),
               tiny.tokenizer.encode("a much longer prompt, to force padding", add_special_tokens=False)]
    gens = tiny.generate(prompts, SamplingParams(max_tokens=12, seed=5))
    for prompt, gen in zip(prompts, gens):
        assert len(gen.completion_ids) == len(gen.logprobs) > 0
        ids = torch.tensor([prompt + gen.completion_ids])
        with torch.no_grad():
            logp = torch.log_softmax(tiny.model(input_ids=ids).logits[0].float(), -1)
        expected = [float(logp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(gen.completion_ids)]
        assert gen.logprobs == pytest.approx(expected, abs=1e-4)


def test_hf_stops_and_seeds(tiny: HFBackend) -> None:
    prompt = tiny.tokenizer.encode("x", add_special_tokens=False)
    a = tiny.generate([prompt], SamplingParams(max_tokens=6, seed=1))[0]
    b = tiny.generate([prompt], SamplingParams(max_tokens=6, seed=1))[0]
    assert a.completion_ids == b.completion_ids and a.finish_reason in ("length", "stop")
    greedy = tiny.generate([prompt], SamplingParams(max_tokens=3, temperature=0))[0]
    assert len(greedy.completion_ids) <= 3
    # A shared training module gets its mode back after sampling.
    tiny.model.train()
    tiny.generate([prompt], SamplingParams(max_tokens=2))
    assert tiny.model.training
    tiny.model.eval()


def test_hf_update_weights_changes_samples(tiny: HFBackend) -> None:
    prompt = tiny.tokenizer.encode("abc", add_special_tokens=False)
    before = tiny.generate([prompt], SamplingParams(max_tokens=4, temperature=0))[0]
    state = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    generator = torch.Generator().manual_seed(123)
    weight = state["model.embed_tokens.weight"]
    tiny.update_weights({"model.embed_tokens.weight": torch.randn(weight.shape, generator=generator)})
    try:
        after = tiny.generate([prompt], SamplingParams(max_tokens=4, temperature=0))[0]
        assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3)
    finally:
        tiny.update_weights(state)
    with pytest.raises(DeepgymError, match="unknown tensors"):
        tiny.update_weights({"not.a.weight": torch.zeros(1)})


def test_tiny_model_dir_loads_by_path(tmp_path) -> None:
    path = write_tiny_model(tmp_path / "tiny", hidden=32)
    llm = make_llm("hf", str(path))
    gen = llm.generate([llm.tokenizer.encode("hi", add_special_tokens=False)], SamplingParams(max_tokens=3))[0]
    assert len(gen.completion_ids) == len(gen.logprobs)
    assert "<tool_call>" in llm.tokenizer.chat_template


def test_missing_library_gives_an_install_hint() -> None:
    with pytest.raises(DeepgymError, match="pip install no_such_lib_xyz"):
        require("no_such_lib_xyz", "a feature")
    with pytest.raises(DeepgymError, match="tiny_model"):
        make_llm("hf", "/nonexistent/model/dir")
    with pytest.raises(DeepgymError, match="unknown LLM backend"):
        make_llm("gpt", "m")


def test_scripted_replays_by_turn() -> None:
    tok = build_tokenizer()
    llm = ScriptedLLM(["first", "second"], tok, default="done")
    p0 = tok.encode("prompt", add_special_tokens=False)
    g0 = llm.generate([p0, p0], SamplingParams())  # two episodes at their first turn
    assert [g.text for g in g0] == ["first", "first"]
    p1 = p0 + g0[0].completion_ids + tok.encode("obs", add_special_tokens=False)
    assert llm.generate([p1], SamplingParams())[0].text == "second"
    chat = ScriptedLLM(["a", "b"])
    assert chat.chat([[{"role": "user", "content": "q"}]], None, SamplingParams())[0].text == "a"


def test_openai_client_retries_then_parses_tool_calls_and_ids() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    logprobs = {"content": [{"token": "token:11", "logprob": -0.5}, {"token": "token:12", "logprob": -0.25}]}

    def respond(body, n):
        if n == 1:
            return 500, {"error": "boom"}, {}
        if n == 2:
            return 429, {"error": "slow down"}, {"Retry-After": "0"}
        return 200, completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls",
                               logprobs=logprobs), {}

    with chat_server(respond) as (url, seen):
        llm = OpenAIBackend(url, "m", backoff=0.01, vllm_extras=True)
        gen = llm.chat([[{"role": "user", "content": "hi"}]], [{"type": "function"}], SamplingParams(max_tokens=9))[0]
    assert len(seen) == 3 and llm.requests == 3
    assert seen[-1]["body"]["tools"] == [{"type": "function"}] and seen[-1]["body"]["max_tokens"] == 9
    assert seen[-1]["body"]["return_tokens_as_token_ids"] is True
    assert gen.finish_reason == "stop" and gen.message["tool_calls"] == [call]
    assert gen.completion_ids == [11, 12] and gen.logprobs == [-0.5, -0.25] and gen.num_tokens == 7


def test_openai_client_failures_are_per_request_or_fail_fast() -> None:
    with chat_server(lambda body, n: (503, {"error": "down"}, {})) as (url, seen):
        gen = OpenAIBackend(url, "m", backoff=0.0, max_retries=2).chat([[{"role": "user", "content": "x"}]],
                                                                        None, SamplingParams())[0]
    assert gen.finish_reason == "error" and "3 tries" in gen.text and len(seen) == 3
    too_long = {"error": {"message": "This model's maximum context length is 4096 tokens"}}
    with chat_server(lambda body, n: (400, too_long, {})) as (url, _):
        gen = OpenAIBackend(url, "m").chat([[{"role": "user", "content": "x"}]], None, SamplingParams())[0]
    assert gen.finish_reason == "context_length"
    with chat_server(lambda body, n: (404, {"error": "no such model"}, {})) as (url, _):
        with pytest.raises(DeepgymError, match="HTTP 404"):
            OpenAIBackend(url, "m").chat([[{"role": "user", "content": "x"}]], None, SamplingParams())


def test_openai_client_times_out_and_limits_concurrency() -> None:
    import threading
    import time

    active, peak, lock = [0], [0], threading.Lock()

    def respond(body, n):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return 200, completion({"role": "assistant", "content": "ok"}), {}

    with chat_server(respond) as (url, seen):
        gens = OpenAIBackend(url, "m", max_concurrency=2).chat([[{"role": "user", "content": str(i)}] for i in range(6)],
                                                                None, SamplingParams())
    assert [g.text for g in gens] == ["ok"] * 6 and peak[0] <= 2
    assert gens[0].completion_ids == [] and gens[0].logprobs == []  # no ids from this server


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None,
                    reason="needs a CUDA GPU and vllm")
def test_vllm_backend_ids_logprobs_and_weight_update(tmp_path) -> None:
    from deepgym_agents.llm.vllm_engine import VLLMBackend

    path = write_tiny_model(tmp_path / "tiny", hidden=64)
    llm = VLLMBackend(str(path), max_model_len=2048, gpu_memory_utilization=0.2, enforce_eager=True)
    prompt = llm.tokenizer.encode("hello", add_special_tokens=False)
    gens: list[Generation] = llm.generate([prompt, prompt], SamplingParams(max_tokens=8, seed=3))
    assert all(len(g.completion_ids) == len(g.logprobs) > 0 for g in gens)
    hf = HFBackend.from_pretrained(str(path), device="cpu")
    ids = torch.tensor([prompt + gens[0].completion_ids])
    with torch.no_grad():
        logp = torch.log_softmax(hf.model(input_ids=ids).logits[0].float(), -1)
    expected = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(gens[0].completion_ids)]
    assert gens[0].logprobs == pytest.approx(expected, abs=2e-2)
    llm.update_weights(hf.model.state_dict())
