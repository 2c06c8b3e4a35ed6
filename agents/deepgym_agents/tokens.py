"""Token accounting for the agent loop: the room an episode's context has left, the ids each turn
records, and how complete a chat server's ids are.

* Token mode (a backend with a tokenizer): the loop owns the ids. The first prompt is the chat
  template's rendering; after each completion the engine's own ids are kept and the template's
  delta (the observation, the next generation prompt) is appended (:mod:`deepgym_agents.chat`), so
  a trajectory holds exactly the ids the engine was fed and sampled. When the next prompt would
  leave fewer than :data:`MIN_COMPLETION_TOKENS` for the answer, the episode ends
  (``context_length``) with its record cut to the context.
* Chat mode: the server owns the ids. Each turn keeps whatever ids it returned, and the
  trajectory says how complete they are (``metadata["ids"]``: ``complete``, ``completion_only``
  or ``absent``).
"""

from __future__ import annotations

import time
from typing import Any

from deepgym_agents.chat import ChatFormatter
from deepgym_agents.llm import Generation, SamplingParams, with_max_tokens
from deepgym_agents.trajectory import Trajectory, Turn

MIN_COMPLETION_TOKENS = 16
"""An episode whose context has room for fewer new tokens than this ends with ``context_length``."""

ID_LEVELS = ("absent", "completion_only", "complete")
"""``metadata["ids"]`` from least to most complete: an episode is as complete as its worst turn."""


def _enough(room: int, params: SamplingParams) -> bool:
    return room >= min(MIN_COMPLETION_TOKENS, params.max_tokens)


def completion_room(used: int | None, max_context: int, params: SamplingParams) -> int | None:
    """Tokens the next completion may take: what the context has left after ``used`` ids (token
    mode; None in chat mode, where the server keeps count), or None when too little is left."""
    room = params.max_tokens if used is None else max_context - used
    return room if _enough(room, params) else None


def turn_params(params: SamplingParams, room: int, episode_seed: int, turn: int) -> SamplingParams:
    """One turn's sampling parameters: ``max_tokens`` within ``room``, and with ``params.seed`` set
    a seed of its own, so samples are distinct across episodes and turns yet reproducible."""
    p = with_max_tokens(params, min(params.max_tokens, room))
    if p.seed is not None:
        p = SamplingParams(p.max_tokens, p.temperature, p.top_p, p.stop, p.seed + 1_000_003 * episode_seed + turn)
    return p


def start_ids(formatter: ChatFormatter, messages: list[dict[str, Any]], traj: Trajectory) -> list[int]:
    """Token mode: the first prompt's ids, and the metadata the later turns update."""
    prompt = formatter.prompt(messages)
    traj.metadata.update(ids="complete", template_prefix_stable=True, observation_special_ids=prompt.env_special_ids)
    return prompt.ids


def extend_ids(ids: list[int], formatter: ChatFormatter, traj: Trajectory, turn: Turn,
               messages: list[dict[str, Any]], new: list[dict[str, Any]], *, done: bool, max_context: int,
               params: SamplingParams) -> bool:
    """Token mode: append ``turn``'s completion and the template's delta after it to ``ids`` (and
    record them on ``turn``). ``messages`` is the conversation before the turn, ``new`` what the
    turn adds after the assistant message. True when the next prompt would not fit: the episode
    ends here, and its record stays within the context (the cut observation is never fed)."""
    if not traj.turns:
        turn.prompt_ids = list(ids)
    assistant = turn.messages[0]
    started = time.perf_counter()
    delta = formatter.delta_after(messages, turn.completion_ids, assistant, new, generation_prompt=not done)
    turn.timing["template"] = time.perf_counter() - started
    ids += turn.completion_ids
    overflow = not done and not _enough(max_context - len(ids) - len(delta.ids), params)
    turn.observation_ids = delta.ids[:max(0, max_context - len(ids))] if overflow else delta.ids
    ids += turn.observation_ids
    meta = traj.metadata
    if overflow:
        meta["observation_cut"] = len(delta.ids) - len(turn.observation_ids)
    if not delta.prefix_stable:
        meta["template_prefix_stable"] = False
    meta["observation_special_ids"] += delta.env_special_ids
    return overflow


def reconcile_chat_ids(traj: Trajectory, turn: Turn, gen: Generation) -> None:
    """Chat mode: keep the server's ids where it gave them, say how complete they are, and count
    the completion tokens as the server counted them."""
    meta = traj.metadata
    if gen.prompt_ids is not None and turn.completion_ids:
        known = traj.flatten().input_ids
        contiguous = gen.prompt_ids[:len(known)] == known
        turn.prompt_ids = gen.prompt_ids[len(known):] if contiguous else list(gen.prompt_ids)
        level = "complete" if contiguous and meta.get("ids", "complete") == "complete" else "completion_only"
    else:
        level = "completion_only" if turn.completion_ids else "absent"
    meta["ids"] = min(level, meta.get("ids", "complete"), key=ID_LEVELS.index)
    counted = gen.num_tokens if gen.num_tokens is not None else len(gen.completion_ids)
    meta["completion_tokens"] = meta.get("completion_tokens", 0) + counted


def template_matches(formatter: ChatFormatter, traj: Trajectory, messages: list[dict[str, Any]]) -> bool:
    """Token mode, at the end: whether the incremental ids equal the template's rendering of the
    whole conversation. Text from the environment that became special tokens counts as a mismatch;
    not a reason to drop the episode: the agent can print special-token strings at will."""
    last = traj.turns[-1]
    return traj.metadata["observation_special_ids"] == 0 and formatter.matches_template(
        traj.flatten().input_ids, messages, generation_prompt=not (last.terminated or last.truncated))
