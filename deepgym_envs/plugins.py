"""Subcommands and agents that other installed packages add to the ``deepgym`` command.

The core never imports a package that builds on it. A package names what it adds in its own
``pyproject.toml``, under two entry-point groups:

- ``deepgym_envs.commands``: a callable taking argparse's subparsers, which adds subcommands
  (the reference agents add ``train`` and ``plot-run`` this way);
- ``deepgym_envs.agents``: an object with ``names`` (the ``--agent`` values it runs),
  ``add_arguments(parser)`` (options it adds to ``deepgym eval``) and ``run(args) -> int``.

A plugin that fails to load is reported on stderr and left out: one broken package never takes
the rest of the command down.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

COMMANDS_GROUP = "deepgym_envs.commands"
AGENTS_GROUP = "deepgym_envs.agents"


@runtime_checkable
class AgentProvider(Protocol):
    """What a ``deepgym_envs.agents`` entry point names: the agents ``deepgym eval`` can run."""

    names: Sequence[str]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(group: str) -> list[tuple[EntryPoint, Any]]:
    loaded = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            loaded.append((ep, ep.load()))
        except Exception as exc:  # a plugin's import error is its own; say so and go on
            print(f"deepgym: plugin {ep.name!r} ({ep.value}) of {group} did not load: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
    return loaded


def command_adders() -> list[Callable[[argparse._SubParsersAction], None]]:
    """The installed packages' subcommand adders, in entry-point name order."""
    return [obj for _, obj in _load(COMMANDS_GROUP)]


def agent_providers() -> list[AgentProvider]:
    """The installed packages' agent providers; an entry point naming something else is reported and skipped."""
    providers = []
    for ep, obj in _load(AGENTS_GROUP):
        if isinstance(obj, AgentProvider):
            providers.append(obj)
        else:
            print(f"deepgym: plugin {ep.name!r} ({ep.value}) of {AGENTS_GROUP} has no names/add_arguments/run; "
                  "left out", file=sys.stderr)
    return providers
