"""Where the online trainer's rollouts come from: a :class:`Collector` returns grouped trajectories.

* :class:`LoopCollector` — the reference agent loop (``deepgym_agents.loop.collect``) against an LLM
  backend (vLLM on a GPU, transformers on a CPU): chat templates, tool calls, SWE-v0.
* :class:`DirectCollector` — batched sampling straight from a ``transformers`` causal LM for
  environments with short plain-text observations (``deepgym/GridNav-v0``): every live episode's
  next token comes from one forward pass, so a tiny policy can be trained from scratch in minutes.
  Its token layout is ``<bos> obs_0 | completion_0 | obs_1 | completion_1 ...`` (no chat template).

Both fill the same :class:`~deepgym_agents.trajectory.Trajectory` schema: the tokens actually sampled, their
behaviour log-probabilities, per-turn rewards, the verdict and the ``masked`` flag.
"""

from __future__ import annotations

import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Sequence

import gymnasium as gym

from deepgym_agents.config import CollectConfig
from deepgym_agents.trajectory import Trajectory, Turn, credit_deferred


class Collector(Protocol):
    """Rolls out ``k`` episodes of each task with the current policy."""

    def collect(self, task_ids: Sequence[str], k: int, *, policy_version: int) -> list[Trajectory]: ...

    def sync(self, model: Any) -> float:
        """Make the generator sample from ``model``'s current weights; returns the seconds it took."""
        ...

    def close(self) -> None:
        """Release environments the collector keeps between batches."""
        ...


@dataclass
class DirectCollector:
    """Batched multi-turn sampling from a ``transformers`` causal LM, one forward pass per token."""

    model: Any
    tokenizer: Any
    env_id: str = "deepgym/GridNav-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_new_tokens: int = 1
    """Tokens per turn; a turn also ends at ``eos``. GridNav's moves are one word = one token."""
    temperature: float = 1.0
    seed: int = 0
    _envs: list[gym.Env] = field(default_factory=list, init=False, repr=False)
    _calls: int = field(default=0, init=False, repr=False)

    def collect(self, task_ids: Sequence[str], k: int, *, policy_version: int = 0) -> list[Trajectory]:
        import torch

        n = len(task_ids) * k
        while len(self._envs) < n:
            self._envs.append(gym.make(self.env_id, **self.env_kwargs))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self._calls)
        self._calls += 1
        trajs, contexts, pending, live = [], [], [], []
        for g, task_id in enumerate(task_ids):
            group = uuid.uuid4().hex
            for i in range(k):
                env = self._envs[g * k + i]
                trajs.append(Trajectory(task_id=task_id, group_id=group, rollout_index=i, env_id=self.env_id,
                                        policy={"model": type(self.model).__name__, "version": policy_version}))
                try:
                    obs, _ = env.reset(seed=self.seed + self._calls * n + g * k + i, options={"task_id": task_id})
                except Exception as exc:
                    obs = ""
                    _end_with_error(trajs[-1], exc)
                else:
                    live.append(g * k + i)
                prompt = [self.tokenizer.bos_token_id, *self._encode(obs)]
                contexts.append(list(prompt))
                pending.append(_Pending(prompt_ids=prompt))
        was_training = self.model.training
        self.model.eval()
        try:
            while live:
                t0 = time.perf_counter()
                tokens, logps = self._sample([contexts[e] for e in live], generator)
                gen_time = (time.perf_counter() - t0) / len(live)
                still = []
                for e, tok, lp in zip(live, tokens, logps):
                    p = pending[e]
                    p.completion.append(tok)
                    p.logprobs.append(lp)
                    p.gen_time += gen_time
                    contexts[e].append(tok)
                    if tok != self.tokenizer.eos_token_id and len(p.completion) < self.max_new_tokens:
                        still.append(e)
                        continue
                    if self._step(e, trajs[e], p, contexts[e]):
                        pending[e] = _Pending(prompt_ids=[])
                        still.append(e)
                live = still
        finally:
            self.model.train(was_training)
        return trajs

    def sync(self, model: Any) -> float:
        self.model = model  # the same module object: nothing to copy
        return 0.0

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs.clear()

    # -- internals ---------------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def _sample(self, contexts: list[list[int]], generator: Any) -> tuple[list[int], list[float]]:
        """One next token for each context (right-padded batch; the logits of each last real token)."""
        import torch

        lengths = torch.tensor([len(c) for c in contexts])
        ids = torch.full((len(contexts), int(lengths.max())), self.tokenizer.pad_token_id, dtype=torch.long)
        for row, ctx in enumerate(contexts):
            ids[row, :len(ctx)] = torch.tensor(ctx)
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()  # (B, T)
        device = next(self.model.parameters()).device
        with torch.no_grad():
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits  # (B, T, V)
            last = logits[torch.arange(len(contexts)), (lengths - 1).to(device)].float()       # (B, V)
            probs = torch.softmax(last / self.temperature, dim=-1).cpu()
            tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)               # (B,)
            # recorded under the raw (T = 1) distribution, like the agent loop's backends
            chosen = torch.log_softmax(last, dim=-1).cpu().gather(1, tokens[:, None]).squeeze(1)
        return tokens.tolist(), chosen.tolist()

    def _step(self, e: int, traj: Trajectory, p: "_Pending", context: list[int]) -> bool:
        """Send the finished completion to episode ``e``'s env; True while the episode goes on."""
        text = self.tokenizer.decode(p.completion, skip_special_tokens=True)
        t0 = time.perf_counter()
        try:
            obs, reward, terminated, truncated, info = self._envs[e].step(text)
        except Exception as exc:  # this episode's sample is lost; the batch's others are not
            _end_with_error(traj, exc)
            return False
        env_time = time.perf_counter() - t0
        done = terminated or truncated
        obs_ids = [] if done else self._encode(obs)
        context.extend(obs_ids)
        traj.turns.append(Turn(prompt_ids=p.prompt_ids, completion_ids=p.completion, completion_logprobs=p.logprobs,
                               observation_ids=obs_ids, messages=[{"role": "assistant", "content": text},
                                                                  {"role": "user", "content": obs}],
                               tool_call=info.get("tool_call"), reward=float(reward),
                               reward_components=dict(info.get("reward_components", {})),
                               terminated=terminated, truncated=truncated,
                               timing={"generate": p.gen_time, "env": env_time}))
        credit_deferred(traj.turns, info)
        traj.episode_return += float(reward)
        if done:
            traj.verdict = info.get("verdict")
            traj.masked = bool(info.get("masked", False))
            traj.stop_reason = "submitted" if terminated else "max_steps"
        return not done


def _end_with_error(traj: Trajectory, exc: Exception) -> None:
    """End ``traj`` masked because its environment raised ``exc``, as the agent loop ends such an
    episode: a harness failure says nothing about the policy, and costs only this sample."""
    traj.stop_reason = f"error: {type(exc).__name__}: {exc}"
    traj.masked = True
    traj.verdict = {"status": "no_verdict", "reason": traj.stop_reason}
    traj.metadata["traceback"] = traceback.format_exc(limit=8)


@dataclass
class _Pending:
    prompt_ids: list[int]
    completion: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    gen_time: float = 0.0


@dataclass
class LoopCollector:
    """Rollouts through the reference agent loop (``deepgym_agents.loop.collect``) and an LLM backend."""

    llm: Any
    config: CollectConfig = field(default_factory=lambda: CollectConfig(show_progress=False))
    """Everything the loop runs with; ``k`` comes from each :meth:`collect` call."""
    _calls: int = field(default=0, init=False, repr=False)

    def collect(self, task_ids: Sequence[str], k: int, *, policy_version: int = 0) -> list[Trajectory]:
        """One batch. Every call draws fresh samples: the loop derives each episode's (and turn's)
        sampling seed from ``config.seed``, so reusing it would give every training step the same
        random draws, and a policy that barely moves would be trained on the same episodes again."""
        from deepgym_agents.loop import collect

        config = replace(self.config, k=k, seed=self.config.seed + self._calls * len(task_ids) * k)
        self._calls += 1
        return collect(self.llm, list(task_ids), config, policy_version=policy_version)

    def sync(self, model: Any) -> float:
        from deepgym_agents.rloo.weights import policy_state_dict

        t0 = time.perf_counter()
        if getattr(self.llm, "model", None) is model:
            return 0.0  # transformers backend sharing the trained module: already in sync
        self.llm.update_weights(policy_state_dict(model))
        return time.perf_counter() - t0

    def close(self) -> None:
        pass  # deepgym_agents.loop.collect opens and closes its environments on every call
