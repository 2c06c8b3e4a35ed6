"""Every strategy the audit knows, by name: class A (:mod:`.strategies`), classes B-G
(:mod:`.trust`) and the attacks on an unsealed test process (:mod:`.sealed`), each registered by
its ``@strategy`` decorator as its module loads."""

from __future__ import annotations

from deepgym_envs.audit import sealed as _sealed  # noqa: F401  (registers the unsealed-process attacks)
from deepgym_envs.audit import trust as _trust  # noqa: F401  (its import registers the classes B-G)
from deepgym_envs.audit.strategies import STRATEGIES, Strategy
from deepgym_envs.errors import DeepgymError

ALL: tuple[Strategy, ...] = tuple(STRATEGIES.values())


def select(names: list[str] | None) -> tuple[Strategy, ...]:
    """The strategies with these names (all of them for None); unknown names fail with the list."""
    if not names:
        return ALL
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise DeepgymError(f"unknown strategy {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
    return tuple(STRATEGIES[n] for n in names)

__all__ = ["ALL", "STRATEGIES", "select"]
