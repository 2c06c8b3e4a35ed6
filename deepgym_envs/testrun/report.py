"""The report channel's contents, read back: what the report plugin streamed, authenticated.

The plugin (``in_sandbox/deepgym_report.py``) runs inside the test process, beside the code under
test, and writes one line per event to a private descriptor: a nonce first, then numbered JSON
events. Whatever else reaches the channel was written by the code under test, and is counted.
"""

from __future__ import annotations

import json
from typing import Any

OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed"})


def parse_report(raw: str | None) -> dict[str, Any] | None:
    """The plugin's report, rebuilt from the lines it streamed (see ``in_sandbox/deepgym_report.py``).

    The first line is the nonce; every later line must be ``NONCE SEQ JSON`` with SEQ counting up
    from 1, one known event each, nothing after the finish, at most one outcome per test. A line
    without the nonce was written by code under test: ignored, and counted in ``forged``. Anything
    else amiss is listed in ``tampered``, with what the plugin itself saw.

    Returns ``{"tests", "exitstatus", "collected", "errors", "tampered", "forged", "finished", "bodies",
    "marked"}`` (``bodies``: test id -> [file, first line, installed?] of the code its call phase ran;
    ``marked``: the xfailed test ids whose item carried an xfail mark before it ran),
    or None when no authenticated stream arrived, or it never finished and nothing looks forged.
    """
    if not raw:
        return None
    nonce, *rest = raw.split("\n")
    if len(nonce) != 32 or not rest:
        return None
    tests: dict[str, str] = {}
    bodies: dict[str, list[Any]] = {}
    marked: set[str] = set()
    errors: list[dict[str, str]] = []
    tampered: list[str] = []
    forged, expected, finish = 0, 1, None
    for line in rest[:-1]:  # what follows the last newline is a line cut off mid-write
        if not line:
            continue
        if not line.startswith(nonce + " "):
            forged += 1
            continue
        seq, _, body = line[len(nonce) + 1:].partition(" ")
        try:
            number, event = int(seq), json.loads(body)
        except ValueError:
            tampered.append("an unreadable report line")
            continue
        if number != expected:
            tampered.append("report lines missing or out of order")
        expected = number + 1
        problem = None if finish is None else "report lines after the end"
        if problem is None:
            problem = _take_event(event, tests, errors, tampered, bodies, marked)
        if isinstance(problem, dict):
            finish = problem
        elif problem:
            tampered.append(problem)
    if finish is None and not tampered and not forged:
        return None
    finish = finish or {}
    return {"tests": tests, "exitstatus": finish.get("exitstatus"), "collected": finish.get("collected", 0),
            "errors": errors, "tampered": list(dict.fromkeys(tampered)), "forged": forged,
            "finished": bool(finish), "bodies": bodies, "marked": sorted(marked)}


def _take_event(event: Any, tests: dict[str, str], errors: list[dict[str, str]], tampered: list[str],
                bodies: dict[str, list[Any]], marked: set[str]) -> str | dict[str, int] | None:
    """Record one streamed event; return a problem, or the finish event's payload."""
    if not isinstance(event, dict):
        return "an unknown report line"
    keys = set(event)
    if keys - {"body", "marked"} == {"test", "outcome"} and isinstance(event["test"], str) and event["outcome"] in OUTCOMES:
        if event["test"] in tests:
            return "two outcomes reported for one test"
        if "marked" in event and (event["outcome"] != "xfailed" or not isinstance(event["marked"], bool)):
            return "an unknown report line"
        tests[event["test"]] = event["outcome"]
        if event.get("marked"):
            marked.add(event["test"])
        body = event.get("body")
        if body is not None:
            if not (isinstance(body, list) and len(body) == 3 and isinstance(body[0], str)):
                return "an unknown report line"
            bodies[event["test"]] = body
    elif keys == {"collecterror", "longrepr"} and isinstance(event["collecterror"], str):
        errors.append({"nodeid": event["collecterror"], "longrepr": str(event["longrepr"])})
    elif keys == {"tampered"} and isinstance(event["tampered"], str):
        tampered.append(event["tampered"][:300])
    elif keys == {"finish"} and isinstance(event["finish"], dict):
        status, collected = event["finish"].get("exitstatus"), event["finish"].get("collected")
        if not isinstance(status, int) or not isinstance(collected, int):
            return "an unknown report line"
        return {"exitstatus": status, "collected": collected}
    else:
        return "an unknown report line"
    return None
