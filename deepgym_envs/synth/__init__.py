"""Task synthesis from real projects (SWE-smith style): inject bugs a project's own tests catch.

``deepgym tasks synth --from pypi:NAME==VERSION --out DIR`` runs :func:`synthesize` per source:

1. fetch the sdist (or a git repository) and record name, version and hash (:mod:`.fetch`);
2. find the code and tests, build the test environment once (:mod:`.project`);
3. run the suite twice in a sandbox and keep the tests that pass both times under the same ids (:mod:`.runner`);
4. inject candidate bugs — small AST-guided edits of eleven kinds, optionally two in a module
   (:mod:`.mutate`) — and keep those that fail at least one reliable test and no more than a bound;
5. deduplicate, decide what is hidden (:mod:`.hide`), write an issue around a reproduction
   script checked on the buggy and clean code (:mod:`.repro`, :mod:`.statement`, :mod:`.drafts`),
   commit each base state and write the rows (:mod:`.writer`), then validate every task as
   ``deepgym tasks validate`` does. Every rejection is recorded with its log (:mod:`.record`).
"""

from deepgym_envs.synth.fetch import SourceSpec, SynthError
from deepgym_envs.synth.pipeline import PackageReport, SynthConfig, synthesize, synthesize_all

__all__ = ["PackageReport", "SourceSpec", "SynthConfig", "SynthError", "synthesize", "synthesize_all"]
