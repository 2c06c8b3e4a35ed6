"""Entry point for test runs inside the sandbox: ``python /deepgym/deepgym_pytest.py ARGS``.

Run as a script from the support directory, so the repository's working directory is *not*
first on ``sys.path`` (a ``pytest.py`` the agent left at the root cannot shadow pytest), and the
report plugin is handed to pytest as an object, before the repository's own code loads.
"""

import sys

import deepgym_report

sys.path[:] = [p for p in sys.path if p != sys.path[0]] if sys.path else sys.path
sys.dont_write_bytecode = True

import pytest  # noqa: E402

sys.exit(pytest.main(sys.argv[1:], plugins=[deepgym_report]))
