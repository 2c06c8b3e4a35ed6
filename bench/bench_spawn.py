"""A cold sandboxed command from a large process: started by programs vs a Python pre-exec hook. Prints JSON.

    python bench/bench_spawn.py [--task deepgym__tabkit-001] [--owner-mb 0,1500] [--repeats 15]

A trainer holds a model, its optimiser and a tokenizer in the process that steps environments. A
Python pre-exec hook (``preexec_fn``) makes every sandboxed command a full fork of that process,
its page tables copied while the interpreter lock is held; ``limits_argv`` sets the same limits
with programs (``sh`` joins the pids cgroup, ``setpriv`` the parent-death signal, ``prlimit`` the
limits), so the child is vfork'ed. Both are timed on ``sb.exec("true")`` on the namespace backend,
alternating, after the process has allocated and touched ``--owner-mb`` MB.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from _common import builtin_task, median_ms, ratio
from deepgym_envs.sandbox import base, make_sandbox
from deepgym_envs.trees import pristine_tree


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--owner-mb", default="0,1500")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    programs = base.limits_argv
    out: dict[str, dict] = {}
    held = bytearray()
    with make_sandbox(pristine_tree(builtin_task(args.task)), "namespace") as sb:
        for mb in (int(x) for x in args.owner_mb.split(",")):
            held = bytearray(mb << 20)
            for i in range(0, len(held), 4096):  # touched: resident, as a model's weights are
                held[i] = 1
            times: dict[str, list[float]] = {"programs": [], "preexec_hook": []}
            for _ in range(args.repeats):
                for name in times:
                    base.limits_argv = programs if name == "programs" else (lambda *a, **k: None)
                    t0 = time.perf_counter()
                    sb.exec("true")
                    times[name].append(time.perf_counter() - t0)
            base.limits_argv = programs
            row = {k: median_ms(v) for k, v in times.items()}
            out[f"{mb}_mb"] = {**row, "hook_over_programs": ratio(row["preexec_hook"], row["programs"])}
    del held
    print(json.dumps({"task": args.task, "repeats": args.repeats, "cold_exec_ms": out}, indent=2))


if __name__ == "__main__":
    main()
