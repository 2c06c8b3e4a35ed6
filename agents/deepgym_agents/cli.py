"""What the reference agents add to the ``deepgym`` command, through entry points (see
``deepgym_envs.plugins``): the agents ``deepgym eval`` runs, and ``train`` / ``plot-run``."""

from __future__ import annotations

import argparse

from rich.markup import escape

from deepgym_agents.base import AGENTS, make_agent
from deepgym_agents.evaluate import LLM_AGENTS, add_llm_eval_arguments, cli_llm_eval
from deepgym_agents.rloo.cli import add_train_parser


def _eval_baseline(args: argparse.Namespace) -> int:
    """``deepgym eval --agent oracle|noop``: a table (or ``--json``) and the results file."""
    from deepgym_envs.evaluation import evaluate, print_report, select_tasks
    from deepgym_envs.progress import fail_without_verdicts, notes, print_json
    from deepgym_envs.tasks import load_tasks

    tasks = select_tasks(load_tasks(args.tasks), args.task_ids or (), args.limit, source=args.tasks)
    result = evaluate(args.agent, lambda task: make_agent(args.agent, task), tasks, task_set=str(args.tasks),
                      backend=args.sandbox, max_steps=args.max_steps, concurrency=args.concurrency)
    if args.out:
        result.write(args.out)
    if args.json:
        print_json(result.to_dict())
    else:
        print_report(result, f"{escape(args.agent)} on {escape(str(args.tasks))}", args.agent)
    note = notes(args.json)
    if args.out:
        note.print(f"results written to {escape(str(args.out))}")
    return fail_without_verdicts(result.episodes, note)


class EvalAgents:
    """The ``deepgym_envs.agents`` entry point: baselines (oracle, noop) and models (openai, vllm, hf)."""

    names = AGENTS + LLM_AGENTS

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_llm_eval_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return cli_llm_eval(args) if args.agent in LLM_AGENTS else _eval_baseline(args)


EVAL_AGENTS = EvalAgents()
ADD_COMMANDS = add_train_parser  # the ``deepgym_envs.commands`` entry point: train, plot-run
