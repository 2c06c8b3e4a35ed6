"""``deepgym eval --agent openai|vllm|hf``: evaluate a model with the agent loop.

    deepgym eval --agent hf --model /tmp/tiny --tasks builtin --k 2 --max-steps 5
    deepgym eval --agent openai --model Qwen/Qwen2.5-Coder-7B-Instruct --base-url http://127.0.0.1:8000/v1

writes, for a run named ``<agent>-<model>-<taskset>-<YYYYmmdd-HHMMSS>``:

* ``leaderboard/results/<run>.json`` — the baselines' results format (``agent, task_set, env_id,
  backend, created_at, machine, summary, episodes``) plus ``model``; ``summary`` adds ``k``,
  ``episodes``, ``pass_at_k`` (``"1"``..``"k"``, the unbiased estimator of Chen et al. 2021) and
  ``tokens`` (generated); each episode adds ``rollout_index``, ``tokens`` and ``stop_reason``.
  ``summary.tasks`` counts distinct tasks; ``resolved``/``resolved_rate`` count episodes.
* ``leaderboard/runs/<run>/predictions.jsonl`` — SWE-bench predictions (``instance_id,
  model_name_or_path, model_patch``), one per task: rollout 0's final diff.
* ``leaderboard/runs/<run>/trajectories.jsonl`` — every episode (and ``.parquet`` with ``--parquet``).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.markup import escape

from deepgym_agents.config import DEFAULT_CONTEXT_TOKENS, CollectConfig
from deepgym_agents.llm import SamplingParams
from deepgym_agents.trajectory import Trajectory
from deepgym_envs.errors import DeepgymError
from deepgym_envs.evaluation import EpisodeResult, EvalResult, print_report, select_tasks
from deepgym_envs.leaderboard.results import pass_at_k as task_pass_at_k
from deepgym_envs.rewards import INVALID_ACTION
from deepgym_envs.sandbox import default_backend

LLM_AGENTS = ("openai", "vllm", "hf")
RESULTS_DIR = Path("leaderboard/results")
RUNS_DIR = Path("leaderboard/runs")


@dataclass
class LLMEpisodeResult(EpisodeResult):
    rollout_index: int = 0
    tokens: int = 0
    """Tokens the model generated in this episode."""
    stop_reason: str = ""

    COLUMNS: ClassVar[tuple[str, ...]] = ("task", "rollout", "verdict", "F2P", "P2P", "steps", "tokens", "stop",
                                          "return")

    def cells(self) -> tuple[str, ...]:
        return (escape(self.task_id), str(self.rollout_index), self.verdict_cell(), *self.test_cells(),
                str(self.steps), str(self.tokens), escape(self.stop_reason[:40]), f"{self.episode_return:.2f}")


@dataclass
class LLMEvalResult(EvalResult):
    model: str = ""
    k: int = 1
    files: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        s = super().summary()
        s.update(tasks=len({e.task_id for e in self.episodes}), episodes=len(self.episodes), k=self.k,
                 pass_at_k=pass_at_k(self.episodes, self.k), tokens=sum(e.tokens for e in self.episodes))
        return s

    def headline(self) -> str:
        s = self.summary()
        passk = ", ".join(f"pass@{j} {100 * v:.1f}%" for j, v in s["pass_at_k"].items())
        return (f"resolved {s['resolved']}/{s['episodes']} episodes ({100 * s['resolved_rate']:.1f}%), {passk}, "
                f"no_verdict {s['no_verdict']}, mean steps {s['mean_steps']:.1f}, {s['tokens']} tokens, "
                f"wall {s['wall_time']:.0f}s")

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["model"] = self.model
        if self.files:
            d["files"] = self.files
        return d


def pass_at_k(episodes: list[EpisodeResult], k: int) -> dict[str, float]:
    """pass@j for j = 1..k, each the mean over the tasks with at least j rollouts of the leaderboard's
    unbiased per-task estimator."""
    by_task: dict[str, list[bool]] = {}
    for e in episodes:
        by_task.setdefault(e.task_id, []).append(e.status == "resolved")
    out = {}
    for j in range(1, k + 1):
        values = [task_pass_at_k(len(r), sum(r), j) for r in by_task.values() if len(r) >= j]
        out[str(j)] = sum(values) / len(values) if values else 0.0
    return out


def episode_result(traj: Trajectory) -> LLMEpisodeResult:
    v = traj.verdict or {"status": "no_verdict", "reason": traj.stop_reason}
    return LLMEpisodeResult(
        task_id=traj.task_id, status=v.get("status", "no_verdict"), steps=len(traj.turns),
        episode_return=traj.episode_return, duration=float(traj.metadata.get("wall_time", 0.0)),
        invalid_actions=sum(t.reward_components.get(INVALID_ACTION, 0.0) < 0 for t in traj.turns),
        reason=v.get("reason", ""), fail_to_pass=v.get("fail_to_pass") or {}, pass_to_pass=v.get("pass_to_pass") or {},
        rollout_index=traj.rollout_index, tokens=completion_tokens(traj), stop_reason=traj.stop_reason)


def completion_tokens(traj: Trajectory) -> int:
    reported = traj.metadata.get("completion_tokens")
    return int(reported) if reported is not None else sum(len(t.completion_ids) for t in traj.turns)


def write_predictions(trajs: list[Trajectory], model: str, path: Path) -> None:
    """SWE-bench's predictions format, one line per task (the first rollout's final diff)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Trajectory] = {}
    for t in sorted(trajs, key=lambda t: t.rollout_index):
        seen.setdefault(t.task_id, t)
    with open(path, "w", encoding="utf-8") as fh:
        for task_id, t in seen.items():
            fh.write(json.dumps({"instance_id": task_id, "model_name_or_path": model,
                                 "model_patch": t.metadata.get("patch", "")}) + "\n")


def run_name(agent: str, model: str, task_set: str, when: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(when))
    return "-".join(_slug(x) for x in (agent, Path(model.rstrip("/")).name or model, Path(task_set).stem or task_set)) \
        + f"-{stamp}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", text).strip("_") or "x"


# -- the command line -------------------------------------------------------------------------------
def add_llm_eval_arguments(p: argparse.ArgumentParser) -> None:
    """The flags ``deepgym eval`` takes for ``--agent openai|vllm|hf``."""
    g = p.add_argument_group("LLM agents (--agent openai|vllm|hf)")
    g.add_argument("--model", default=None, help="model path or id (hf, vllm) or served model name (openai)")
    g.add_argument("--base-url", default=None, help="openai: the endpoint, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key", default=None, help="openai: bearer token (default $OPENAI_API_KEY)")
    g.add_argument("--vllm-extras", action="store_true", help="openai: ask a vLLM server for token ids too")
    g.add_argument("--k", type=int, default=1, help="rollouts per task (pass@1..k)")
    g.add_argument("--max-tokens", type=int, default=1024, help="tokens per model call")
    g.add_argument("--max-context", type=int, default=0, help="context length in tokens (0 = the model's)")
    g.add_argument("--tokenizer", default=None,
                   help="openai: the served model's tokenizer (name or path), to hold prompts within --max-context")
    g.add_argument("--temperature", type=float, default=0.7)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--run-dir", default=None, help=f"predictions and trajectories (default {RUNS_DIR}/<run>)")
    g.add_argument("--parquet", action="store_true", help="also write the trajectories as Parquet")


def make_backend(args: argparse.Namespace) -> Any:
    if not args.model:
        raise DeepgymError(f"--agent {args.agent} needs --model")
    if args.agent == "openai":
        from deepgym_agents.llm.openai_client import OpenAIBackend

        return OpenAIBackend(args.base_url or "", args.model, api_key=args.api_key,
                             max_concurrency=args.concurrency, vllm_extras=args.vllm_extras,
                             tokenizer=args.tokenizer, max_context=args.max_context)
    if args.agent == "vllm":
        from deepgym_agents.llm.vllm_engine import VLLMBackend

        return VLLMBackend(args.model, max_model_len=args.max_context or None, seed=args.seed)
    from deepgym_agents.llm.hf import HFBackend

    return HFBackend.from_pretrained(args.model)


def model_context(llm: Any, requested: int) -> int:
    """The context length to keep episodes within: asked for, else the engine's or the model's."""
    if requested:
        return requested
    vllm_config = getattr(getattr(getattr(llm, "engine", None), "llm_engine", None), "model_config", None)
    n = getattr(vllm_config, "max_model_len", None) or getattr(
        getattr(getattr(llm, "model", None), "config", None), "max_position_embeddings", None)
    return n if isinstance(n, int) and n > 0 else DEFAULT_CONTEXT_TOKENS


def run_llm_eval(args: argparse.Namespace) -> LLMEvalResult:
    """Everything ``deepgym eval --agent openai|vllm|hf`` does, minus printing."""
    from deepgym_agents.export import to_parquet
    from deepgym_agents.loop import collect
    from deepgym_agents.trajectory import read_trajectories
    from deepgym_envs.tasks import load_tasks

    tasks = select_tasks(load_tasks(args.tasks), args.task_ids or (), args.limit, source=args.tasks)
    llm = make_backend(args)
    model = llm.model_name
    name = run_name(args.agent, args.model, str(args.tasks))
    run_dir = Path(args.run_dir) if args.run_dir else RUNS_DIR / name
    traj_path = run_dir / "trajectories.jsonl"
    token_mode = llm.tokenizer is not None
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                            stop=["</tool_call>"] if token_mode else [], seed=args.seed)
    env_kwargs: dict[str, Any] = {"tasks": tasks}
    if args.sandbox:
        env_kwargs["sandbox"] = args.sandbox
    started = time.monotonic()
    trajs = collect(llm, [t.instance_id for t in tasks], CollectConfig(
        env_kwargs=env_kwargs, k=args.k, concurrency=args.concurrency, max_steps=args.max_steps,
        max_context_tokens=model_context(llm, args.max_context), params=params, out=traj_path, seed=args.seed))
    wall = time.monotonic() - started
    files = {"trajectories": str(traj_path), "predictions": str(run_dir / "predictions.jsonl")}
    write_predictions(trajs, model, run_dir / "predictions.jsonl")
    if args.parquet:
        files["parquet"] = str(run_dir / "trajectories.parquet")
        to_parquet(read_trajectories(traj_path), files["parquet"])
    result = LLMEvalResult(args.agent, str(args.tasks), env_kwargs.get("sandbox") or default_backend(),
                           [episode_result(t) for t in trajs], wall, model=model, k=args.k, files=files)
    out = Path(args.out) if args.out else RESULTS_DIR / f"{name}.json"
    result.files["results"] = str(out)  # before writing: --json prints the very document the file holds
    result.write(out)
    return result


def cli_llm_eval(args: argparse.Namespace) -> int:
    """``deepgym eval`` for the LLM agents: run, then print a per-episode table and the summary, or
    with ``--json`` the results document alone on stdout (notes on stderr)."""
    from deepgym_envs.progress import fail_without_verdicts, notes, print_json

    result = run_llm_eval(args)
    note = notes(args.json)
    if args.json:
        print_json(result.to_dict())
    else:
        print_report(result, f"{escape(args.agent)} {escape(result.model)} on {escape(str(args.tasks))} (k={args.k})",
                     result.model)
    for what, path in result.files.items():
        note.print(f"{what}: {escape(path)}", soft_wrap=True)
    return fail_without_verdicts(result.episodes, note)
