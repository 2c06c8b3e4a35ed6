"""Canary tests: per grading, copies of the graded tests planted beside them, that only the host knows of.

The code under test runs inside the test process, so in principle it can rewrite any outcome the
process reports. What it cannot do is tell which tests it must leave alone. Each grading plants
a few copies of graded tests, drawn from the task's pool proven on the gold patch
(:mod:`.proof`): a perturbed copy (one expected value changed, :mod:`.copies`) must not pass
beside its original, and an exact copy must pass wherever its original does. Both are named and
placed like their siblings (:mod:`.placing`), so telling a perturbed copy from its original takes
the task's answer. A forger that turns failures into passes turns both of a pair; one that turns
only the tests it knows by name leaves their copies failing; one that drops what it does not
recognise drops a copy: each time the run is marked tampered. Canaries never appear in a
verdict's tests, and the check is host-side (:func:`check`).

Where no pool can be proven (no graded test compares with a literal, the gold patch cannot run),
the template canaries of :mod:`.template` are planted instead; :attr:`Canary.origin` says which.

>>> pool = grading.canary_pool(task)                  # doctest: +SKIP
>>> planted = plant(sb, ids, pool=pool)              # doctest: +SKIP
>>> {c.origin for c in planted}                      # doctest: +SKIP
{'copy'}
"""

from __future__ import annotations

import random
from pathlib import Path

from deepgym_envs.canaries.canary import Canary, Expect, check
from deepgym_envs.canaries.copies import Candidate
from deepgym_envs.canaries.placing import can_name, render
from deepgym_envs.canaries.proof import Pool, proven_pool
from deepgym_envs.canaries.template import plant_templates, project_keeps_state
from deepgym_envs.errors import ToolError
from deepgym_envs.sandbox import Sandbox

__all__ = ["Canary", "Expect", "Pool", "check", "plant", "proven_pool"]


def plant(sb: Sandbox, ids: list[str], rng: random.Random | None = None, pristine: Path | None = None,
          pool: Pool | None = None) -> list[Canary]:
    """Plant canaries in the files holding ``ids`` (host-side writes); return what was planted.

    From ``pool`` (see :func:`proven_pool`) where it is usable: copies of a few graded tests among
    ``ids``, FAIL_TO_PASS tests first, at most one copy of each, perturbed ones and exact ones
    both. Otherwise the template canaries (``pristine``, the task's pristine tree on the host,
    decides how they call the project).
    """
    rng = rng or random.SystemRandom()
    # Copies call the project as their originals do: where it keeps state between calls, a copy
    # that runs first could change an original's outcome (an honest partial fix would lose a test).
    if pool is not None and pool.usable and pristine is not None and project_keeps_state(sb, ids, pristine):
        pool = None
    planted = _plant_copies(sb, ids, rng, pool) if pool is not None and pool.usable else []
    return planted or plant_templates(sb, ids, rng, pristine)


def _plant_copies(sb: Sandbox, ids: list[str], rng: random.Random, pool: Pool) -> list[Canary]:
    sources: dict[str, str] = {}
    for cand in pool.candidates:
        if cand.file not in sources:
            try:
                sources[cand.file] = sb.read_file(cand.file).decode("utf-8")
            except (ToolError, UnicodeDecodeError):
                sources[cand.file] = ""
    picked = _pick(_choose(ids, rng, pool), sources, 6 + rng.randrange(3))
    planted: list[Canary] = []
    texts = {}
    for path in dict.fromkeys(c.file for c in picked):
        rendered = render(path, sources[path], [c for c in picked if c.file == path], rng)
        if rendered is None:
            continue
        texts[path] = rendered[0]
        for cand, nodeid in rendered[1]:
            original = nodeid.rsplit("::", 1)[0] + "::" + cand.original
            planted += [Canary(nodeid + case, path, expect, "copy", original + twin) for case, expect, twin in cand.expect]
    if not {"passed", "failed"} <= {c.expect for c in planted}:
        return []  # nothing written: the template canaries go into the files as they were
    for path, text in texts.items():
        sb.write_file(path, text.encode("utf-8"))
    return planted


def _pick(groups: list[list[Candidate]], sources: dict[str, str], wanted: int) -> list[Candidate]:
    """The first ``wanted`` graded tests a copy of which can be named, one copy each; a perturbed
    and an exact one among them wherever those tests have both. A FAIL_TO_PASS test gets both
    where it has both: a forger must turn it, and only the pair catches both kinds of forger every
    time (one that agrees with any expected value passes the perturbed copy; one that turns the
    test by its public name leaves the exact copy failing)."""
    usable = []
    for options in groups:
        named = [c for c in options if can_name(sources[c.file], c)]
        if named:
            usable.append(named)
        if len(usable) == wanted:
            break
    chosen = [options[0] for options in usable]
    for want in (True, False):
        if len(chosen) > 1 and not any(c.perturbed == want for c in chosen):
            swap = [i for i, options in enumerate(usable) if any(c.perturbed == want for c in options)]
            if swap:
                chosen[swap[-1]] = next(c for c in usable[swap[-1]] if c.perturbed == want)
    # After the one-each picks, so that a second copy that cannot be named costs nothing else.
    extra = [next((c for c in options if c.perturbed != pick.perturbed), None) for pick, options in zip(chosen, usable)
             if pick.first]
    return chosen + [c for c in extra if c is not None]


def _choose(ids: list[str], rng: random.Random, pool: Pool) -> list[list[Candidate]]:
    """Per graded test that runs, its copies in the order to try them; the tests in the order to
    try them: FAIL_TO_PASS tests first (the tests a forger needs to turn), each perturbed copy
    first more often than not."""
    running = {i.split("[", 1)[0] for i in ids}
    groups: dict[tuple, list[Candidate]] = {}
    for cand in pool.candidates:
        base = f"{cand.file}::{cand.cls}::{cand.original}" if cand.cls else f"{cand.file}::{cand.original}"
        if base in running:
            groups.setdefault((cand.file, cand.cls, cand.original), []).append(cand)
    keys = list(groups)
    rng.shuffle(keys)
    keys.sort(key=lambda k: not groups[k][0].first)
    out = []
    for k in keys:
        perturbed = [c for c in groups[k] if c.perturbed]
        exact = [c for c in groups[k] if not c.perturbed]
        rng.shuffle(perturbed)
        out.append([*perturbed, *exact] if rng.random() < 0.75 else [*exact, *perturbed])
    return out
