"""Entry point for test runs inside the sandbox: ``python /deepgym/deepgym_pytest.py ARGS``.

Run as a script from the support directory, so the repository's working directory is *not*
first on ``sys.path`` (a ``pytest.py`` the agent left at the root cannot shadow pytest). The
report plugin is executed from its file into a private namespace (never ``sys.modules``) and
handed to pytest as an object, before the repository's own code loads. Everything happens inside
``_main``: this module's globals hold nothing a test could reach for.
"""

import os
import sys


def _main():
    support = sys.path[0]
    sys.path[:] = [p for p in sys.path if p != support]
    sys.dont_write_bytecode = True
    path = os.path.join(support, "deepgym_report.py")
    with open(path) as fh:
        code = compile(fh.read(), path, "exec")
    namespace = {"__name__": "deepgym_report", "__file__": path}
    exec(code, namespace)
    plugin = namespace["make_plugin"]()

    import pytest

    return pytest.main(sys.argv[1:], plugins=[plugin])


sys.exit(_main())
