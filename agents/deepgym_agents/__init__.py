"""Reference agents for deepgym_envs. They use only the public environment API.

``make_agent(name, task)`` builds a baseline by name: ``oracle`` (applies the gold fix through the
environment's own tools) or ``noop`` (submits at once).
"""

from deepgym_agents.base import Agent, make_agent, AGENTS

__all__ = ["AGENTS", "Agent", "make_agent"]
