"""Entry point for test runs inside the sandbox: ``python /deepgym/deepgym_pytest.py ARGS``.

Run as a script from the support directory, so the repository's working directory is *not*
first on ``sys.path`` (a ``pytest.py`` the agent left at the root cannot shadow pytest). The
report plugin is executed from its file into a private namespace (never ``sys.modules``) and
handed to pytest as an object, before the repository's own code loads. Everything happens inside
``_main``: this module's globals hold nothing a test could reach for.
"""

import os
import sys

#: Plugins shipped beside the runner that a task's arguments may enable with ``-p NAME``.
SHIPPED = ("deepgym_django",)


def _installed(path):
    """The entries of ``path`` inside the interpreter's own installation (standard library, its
    environment's packages): not ``PYTHONPATH`` nor what a task environment's ``.pth`` adds (the
    workspace). Until the report plugin exists only these are searched: a module the standard
    library looks for and lacks (``copy`` asks for ``org``) or shadows from ``PYTHONPATH`` would
    otherwise run the change's code before anything can watch it."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    return [p for p in path if p and os.path.isabs(p)
            and any(os.path.realpath(p) == r or os.path.realpath(p).startswith(r.rstrip(os.sep) + os.sep) for r in roots)]


def shipped_plugins(support, args):
    """Load the shipped plugins ``args`` enable (``-p NAME``) from ``support``, by path, into
    ``sys.modules``, where pytest's ``-p`` finds them: the support directory stays off
    ``sys.path``. Their module code imports only what pytest has; their hooks run later."""
    import types

    for name in SHIPPED:
        if f"-p{name}" in args or any(a == "-p" and b == name for a, b in zip(args, args[1:])):
            path = os.path.join(support, name + ".py")
            with open(path) as fh:
                code = compile(fh.read(), path, "exec")
            module = types.ModuleType(name)
            module.__file__ = path
            exec(code, module.__dict__)
            sys.modules[name] = module


def sealed_files(args):
    """The test files a sealed run names on its command line (real paths), or None for a run that
    is not sealed (the agent's own ``run_tests``)."""
    if os.environ.pop("DEEPGYM_SEAL", None) != "1":
        return None
    files = {a.partition("::")[0] for a in args if not a.startswith("-")}
    return sorted({os.path.realpath(f) for f in files if f.endswith(".py") and os.path.isfile(f)})


def _workspace_runner():
    """Whether the test runner itself (pytest, pluggy) was loaded from the working directory: an
    editable install of the repository under test, found through the installation's own path."""
    cwd = os.path.realpath(os.getcwd())
    for name in ("pytest", "_pytest", "pluggy"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and (os.path.realpath(file) + os.sep).startswith(cwd + os.sep):
            return True
    return False


def lock(support, files, compiled, holders):
    """Seal this process (``deepgym_lockdown.py``) for the code under test: after the report plugin
    has read the test files, before pytest imports anything of the repository."""
    allow = [c for c in os.environ.pop("DEEPGYM_ALLOW", "").split(",") if c]
    not_tests = [p for p in os.environ.pop("DEEPGYM_NOT_TESTS", "").split("\n") if p]
    path = os.path.join(support, "deepgym_lockdown.py")
    with open(path) as fh:
        namespace = {"__name__": "deepgym_lockdown", "__file__": path}
        exec(compile(fh.read(), path, "exec"), namespace)
    namespace["seal"](os.path.realpath(os.getcwd()), support, files, compiled, allow, holders, not_tests)


def _main():
    support = sys.path[0]
    sys.path[:] = [p for p in sys.path if p != support]
    sys.dont_write_bytecode = True
    sealed = sealed_files(sys.argv[1:])
    path = os.path.join(support, "deepgym_report.py")
    with open(path) as fh:
        code = compile(fh.read(), path, "exec")
    full = list(sys.path)
    sys.path[:] = _installed(full)
    namespace = {"__name__": "deepgym_report", "__file__": path}
    try:
        exec(code, namespace)
    except ImportError:
        # pytest (or pluggy) is not among the interpreter's own packages: missing from the
        # environment, or only the repository's (a project that is pytest itself, whose own runner
        # must not grade it). Either way nothing runs.
        sys.stderr.write("deepgym: pytest is not installed in this task's environment (the interpreter's own "
                         "packages); where it is only in the repository under test, the project is pytest "
                         "itself, which deepgym never grades on its own runner\n")
        return 4
    if sealed is not None and _workspace_runner():
        sys.stderr.write("deepgym: pytest or pluggy loads from the repository under test (its project is "
                         "pytest itself); deepgym does not grade a project with its own test runner\n")
        return 4
    compiled = {}
    plugin = namespace["make_plugin"](compiled, sealed is not None)

    import pytest

    shipped_plugins(support, sys.argv[1:])  # after the report plugin, on the path it was loaded with
    sys.path[:] = full
    if sealed is not None and not hasattr(sys, "addaudithook"):
        # Python before 3.8 has no audit hooks: such rows are graded as before the seal, and say so.
        sys.stderr.write("deepgym: this Python has no audit hooks; the test process is not sealed\n")
    elif sealed is not None:
        lock(support, sealed, compiled, [globals(), namespace])
    return pytest.main(sys.argv[1:], plugins=[plugin])


if __name__ == "__main__":
    sys.exit(_main())
