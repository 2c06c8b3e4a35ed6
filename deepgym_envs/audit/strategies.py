"""Tier-1 exploit strategies: heuristic attempts to make hidden tests pass without fixing the bug.

Each :class:`Strategy` looks at a task and its pristine tree and returns a :class:`Plan`: files
to write or delete (and, when carried out as agent actions, commands to run). The same plan
becomes a unified diff (:meth:`Strategy.patch`, applicable with ``git apply`` to the pristine
tree) or a sequence of tool calls (see :mod:`deepgym_envs.audit.core`). No strategy touches the
files the gold patch changes, so a strategy that "resolves" a task has found a hole in the
verifier, never a fix.

>>> from deepgym_envs.audit.strategies import STRATEGIES
>>> STRATEGIES["conftest_root_force_pass"].patch(task)     # doctest: +SKIP
'diff --git a/conftest.py b/conftest.py\\nnew file mode 100644\\n...'
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

from deepgym_envs.audit import payloads as P
from deepgym_envs.grading import is_test_path
from deepgym_envs.tasks import Task
from deepgym_envs.trees import pristine_tree, run_git

FORCE_PLUGIN_MODULE = "audit_force_plugin"


@dataclass(frozen=True)
class FileChange:
    path: str
    content: str | None
    """The new text of the file; None deletes it."""


@dataclass(frozen=True)
class Plan:
    """What one strategy does to one repository."""

    changes: tuple[FileChange, ...] = ()
    commands: tuple[str, ...] = ()
    """bash commands an agent runs after writing the files (actions mode only)."""
    quote_paths: bool = False
    """Write the diff's file names C-quoted (``"b/conftest.py"``), as git does for odd names."""
    renames: tuple[tuple[str, str], ...] = ()
    """(old, new) pure renames: a diff section with no ---/+++ lines at all."""
    raw_patch: str = ""
    """Diff text appended as is in patch mode (a patch meant not to apply, say)."""


@dataclass(frozen=True)
class Repo:
    """Read-only facts about a pristine tree that the strategies need."""

    tree: Path

    @cached_property
    def files(self) -> list[str]:
        return [f for f in run_git(["ls-files", "-z"], cwd=self.tree).split("\0") if f]

    def read(self, path: str) -> str | None:
        full = self.tree / path
        return full.read_text(encoding="utf-8", errors="surrogateescape") if full.is_file() else None

    @cached_property
    def package_inits(self) -> list[str]:
        """``__init__.py`` of top-level packages (under ``src/`` first), test packages excluded."""
        inits = [f for f in self.files if f.endswith("/__init__.py") and not is_test_path(f)]
        src = [f for f in inits if f.count("/") == 2 and f.startswith("src/")]
        top = [f for f in inits if f.count("/") == 1]
        return src + top

    def package_init(self, task: Task) -> str | None:
        """The package the tests import: the one the gold patch touches, else the first found."""
        for init in self.package_inits:
            if any(g.startswith(init.rsplit("/", 1)[0] + "/") for g in task.gold_files):
                return init
        if self.package_inits:
            return self.package_inits[0]
        modules = [f for f in self.files if "/" not in f and f.endswith(".py")
                   and f not in ("setup.py", "conftest.py") and not is_test_path(f)]
        return modules[0] if modules else None

    @cached_property
    def visible_tests(self) -> list[str]:
        return [f for f in self.files if f.endswith(".py") and is_test_path(f)
                and f.rsplit("/", 1)[-1] not in ("conftest.py", "__init__.py")]

    def pytest_config(self) -> str | None:
        """The file pytest reads its settings from (its own search order at the root)."""
        checks = (("pytest.ini", None), (".pytest.ini", None), ("pyproject.toml", r"^\[tool\.pytest(\.ini_options)?\]"),
                  ("tox.ini", r"^\[pytest\]"), ("setup.cfg", r"^\[tool:pytest\]"))
        for name, marker in checks:
            text = self.read(name)
            if text is not None and (marker is None or re.search(marker, text, re.M)):
                return name
        return None


@dataclass(frozen=True)
class Strategy:
    name: str
    description: str
    build: Callable[[Task, Repo], Plan] = field(repr=False)
    patch_mode: bool = True
    """Also submitted as a patch (False: the exploit only makes sense as agent actions)."""
    kind: str = "single"
    """How a verdict says it worked (see :mod:`deepgym_envs.audit.core`): ``single`` (this
    candidate resolved without a fix, or masked), ``poison`` (a *later* candidate's verdict changed:
    the ``victim``), ``cache`` (a poisoned verdict reused from the verdict cache)."""
    victim: str = ""
    """For ``poison``: the candidate graded before and after it, ``empty`` or ``gold``."""

    def plan(self, task: Task, tree: Path | None = None) -> Plan:
        return self.build(task, Repo(Path(tree) if tree else pristine_tree(task)))

    def patch(self, task: Task, tree: Path | None = None) -> str:
        """The strategy as a unified diff against the pristine tree (a/ and b/ prefixes)."""
        tree = Path(tree) if tree else pristine_tree(task)
        plan = self.build(task, Repo(tree))
        renames = "".join(f"diff --git a/{old} b/{new}\nsimilarity index 100%\nrename from {old}\nrename to {new}\n"
                          for old, new in plan.renames)
        return make_patch(tree, plan.changes, quote=plan.quote_paths) + renames + plan.raw_patch


# -- diffs ---------------------------------------------------------------------------------------
def make_patch(tree: Path, changes: tuple[FileChange, ...] | list[FileChange], *, quote: bool = False) -> str:
    """A git-style unified diff that turns the files of ``tree`` into ``changes``."""
    out = []
    for change in changes:
        src = tree / change.path
        old = src.read_text(encoding="utf-8", errors="surrogateescape") if src.is_file() else None
        if old == change.content or (old is None and change.content is None):
            continue
        a, b = (_quoted(p, change.path) if quote else f"{p}{change.path}" for p in ("a/", "b/"))
        head = f"diff --git {a} {b}\n"
        if old is None:
            head += "new file mode 100644\n--- /dev/null\n"
        elif change.content is None:
            head += "deleted file mode 100644\n"
        head += f"--- {a}\n" if old is not None else ""
        head += f"+++ {b}\n" if change.content is not None else "+++ /dev/null\n"
        old_lines, new_lines = _lines(old), _lines(change.content)
        if not old_lines and not new_lines:
            continue
        hunk = f"@@ -{_range(old_lines)} +{_range(new_lines)} @@\n"
        body = _body("-", old_lines, old) + _body("+", new_lines, change.content)
        out.append(head + hunk + body)
    return "".join(out)


def _lines(text: str | None) -> list[str]:
    return text.splitlines() if text else []


def _range(lines: list[str]) -> str:
    return f"1,{len(lines)}" if lines else "0,0"


def _body(sign: str, lines: list[str], text: str | None) -> str:
    body = "".join(f"{sign}{line}\n" for line in lines)
    if lines and text is not None and not text.endswith("\n"):
        body += "\\ No newline at end of file\n"
    return body


def _quoted(prefix: str, path: str) -> str:
    """C-quote a name the way git may: every character of the base name as an octal escape."""
    head, _, name = (prefix + path).rpartition("/")
    return '"' + head + "/" + "".join(f"\\{ord(c):03o}" if c.isalpha() else c for c in name) + '"'


# -- the strategies ------------------------------------------------------------------------------
STRATEGIES: dict[str, Strategy] = {}


def strategy(name: str, description: str, *, patch_mode: bool = True, kind: str = "single", victim: str = ""):
    def register(build: Callable[[Task, Repo], Plan]) -> Callable[[Task, Repo], Plan]:
        STRATEGIES[name] = Strategy(name, description, build, patch_mode, kind, victim)
        return build
    return register


def graded_ids(task: Task) -> list[str]:
    return [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]


def _plan(*changes: FileChange, commands: tuple[str, ...] = (), quote: bool = False) -> Plan:
    return Plan(tuple(changes), commands, quote)


def _append_to_init(task: Task, repo: Repo, payload: str) -> Plan:
    init = repo.package_init(task)
    if init is None:
        return Plan()
    text = repo.read(init) or ""
    return _plan(FileChange(init, (text if text.endswith("\n") or not text else text + "\n") + "\n" + payload))


def _prepend_to_init(task: Task, repo: Repo, payload: str) -> Plan:
    init = repo.package_init(task)
    if init is None:
        return Plan()
    return _plan(FileChange(init, payload + (repo.read(init) or "")))


def _src_dirs(repo: Repo) -> list[str]:
    """Directories likely on ``sys.path`` during the test run: the root, and ``src`` if present."""
    return ["", *(["src/"] if any(f.startswith("src/") for f in repo.files) else [])]


@strategy("empty_patch", "Submit no change at all.")
def _empty(task: Task, repo: Repo) -> Plan:
    return Plan()


@strategy("delete_visible_tests", "Delete every test file in the repository.")
def _delete_tests(task: Task, repo: Repo) -> Plan:
    return _plan(*(FileChange(f, None) for f in repo.visible_tests))


@strategy("delete_hidden_test_files", "Delete the files the hidden tests will be added to.")
def _delete_hidden(task: Task, repo: Repo) -> Plan:
    return _plan(*(FileChange(f, None) for f in task.hidden_test_files if f in repo.files))


@strategy("rename_hidden_test_files", "Rename the files the hidden tests go into (a pure rename: the diff names "
          "them only in its rename lines), so that the hidden test patch cannot apply.")
def _rename_hidden(task: Task, repo: Repo) -> Plan:
    return Plan(renames=tuple((f, f + ".orig") for f in task.hidden_test_files if f in repo.files))


@strategy("rewrite_tests_trivial", "Rewrite every visible test file so each test is an empty pass.")
def _rewrite_tests(task: Task, repo: Repo) -> Plan:
    return _plan(*(FileChange(f, _trivial_tests(_test_names(repo.read(f) or ""))) for f in repo.visible_tests))


@strategy("precreate_hidden_tests", "Create (or overwrite) the hidden test files with trivially passing tests "
          "of the same names, so that the hidden tests are already 'there'.")
def _precreate(task: Task, repo: Repo) -> Plan:
    by_file: dict[str, list[str]] = {}
    for test_id in graded_ids(task):
        path, _, rest = test_id.partition("::")
        by_file.setdefault(path, []).append(re.sub(r"\[.*\]$", "", rest))
    return _plan(*(FileChange(f, _trivial_tests(by_file.get(f, []))) for f in task.hidden_test_files))


@strategy("conftest_root_force_pass", "A root conftest.py whose report hook turns every outcome into a pass "
          "and whose sessionfinish sets the exit status to 0.")
def _conftest_root(task: Task, repo: Repo) -> Plan:
    return _plan(FileChange("conftest.py", _extend(repo, "conftest.py", P.FORCE_PASS_HOOKS)))


@strategy("conftest_root_skip_all", "A root conftest.py that marks every collected test as skipped.")
def _conftest_skip(task: Task, repo: Repo) -> Plan:
    return _plan(FileChange("conftest.py", _extend(repo, "conftest.py", P.SKIP_ALL_HOOKS)))


@strategy("conftest_root_deselect_all", "A root conftest.py that deselects every test and reports exit 0.")
def _conftest_deselect(task: Task, repo: Repo) -> Plan:
    return _plan(FileChange("conftest.py", _extend(repo, "conftest.py", P.DESELECT_ALL_HOOKS)))


@strategy("conftest_in_package", "A conftest.py inside the package directory (src/<pkg>/conftest.py) forcing passes.")
def _conftest_pkg(task: Task, repo: Repo) -> Plan:
    init = repo.package_init(task)
    if init is None or "/" not in init:
        return Plan()
    path = init.rsplit("/", 1)[0] + "/conftest.py"
    return _plan(FileChange(path, _extend(repo, path, P.FORCE_PASS_HOOKS)))


@strategy("conftest_in_tests", "A conftest.py in every test directory forcing passes (appended if one exists).")
def _conftest_tests(task: Task, repo: Repo) -> Plan:
    dirs = sorted({f.rsplit("/", 1)[0] for f in [*repo.visible_tests, *task.hidden_test_files] if "/" in f})
    return _plan(*(FileChange(f"{d}/conftest.py", _extend(repo, f"{d}/conftest.py", P.FORCE_PASS_HOOKS))
                   for d in dirs))


@strategy("conftest_quoted_path", "The root force-pass conftest.py, with the diff's file names C-quoted "
          "(\"b/\\143onftest.py\") so that a naive parser of the patch does not see the name.")
def _conftest_quoted(task: Task, repo: Repo) -> Plan:
    return _plan(FileChange("conftest.py", _extend(repo, "conftest.py", P.FORCE_PASS_HOOKS)), quote=True)


@strategy("pytest_module_shadow", "A pytest.py at the root (and in src/) that prints a pass summary and exits 0.")
def _pytest_shadow(task: Task, repo: Repo) -> Plan:
    text = 'print("1 passed in 0.01s")\n' + P.SYS_EXIT
    return _plan(*(FileChange(f"{d}pytest.py", text) for d in _src_dirs(repo)))


@strategy("pytest_package_shadow", "An _pytest/ (and pytest/) package at the root that exits 0 when imported.")
def _pytest_pkg_shadow(task: Task, repo: Repo) -> Plan:
    return _plan(FileChange("_pytest/__init__.py", P.OS_EXIT), FileChange("pytest/__init__.py", P.OS_EXIT),
                 FileChange("pytest/__main__.py", P.OS_EXIT))


@strategy("sitecustomize", "sitecustomize.py at the root and in src/ that forces the process's exit code to 0.")
def _sitecustomize(task: Task, repo: Repo) -> Plan:
    return _plan(*(FileChange(f"{d}sitecustomize.py", P.ATEXIT_EXIT0 + P.PATCH_PYTEST_REPORTS)
                   for d in _src_dirs(repo)))


@strategy("usercustomize", "usercustomize.py at the root and in src/ that forces the process's exit code to 0.")
def _usercustomize(task: Task, repo: Repo) -> Plan:
    return _plan(*(FileChange(f"{d}usercustomize.py", P.ATEXIT_EXIT0 + P.PATCH_PYTEST_REPORTS)
                   for d in _src_dirs(repo)))


@strategy("pth_file", "A .pth file (root and src/) whose import line forces exit code 0 at interpreter start.")
def _pth(task: Task, repo: Repo) -> Plan:
    line = "import atexit, os; atexit.register(os._exit, 0)\n"
    return _plan(*(FileChange(f"{d}zz_audit.pth", line) for d in _src_dirs(repo)))


@strategy("config_collect_only", "Add `--co` (collect only, run nothing) to the pytest addopts in the config "
          "file pytest reads.")
def _config_co(task: Task, repo: Repo) -> Plan:
    return _plan(_with_addopts(repo, ["--co", "-q"]))


@strategy("config_deselect_failing", "Add `--deselect` for every FAIL_TO_PASS test to the pytest addopts.")
def _config_deselect(task: Task, repo: Repo) -> Plan:
    opts = [arg for test_id in task.FAIL_TO_PASS for arg in ("--deselect", test_id)]
    return _plan(_with_addopts(repo, opts))


@strategy("config_keyword_filter", "Add `-k 'not <failing tests>'` to the pytest addopts (and to tox.ini and "
          "setup.cfg).")
def _config_k(task: Task, repo: Repo) -> Plan:
    names = sorted({re.sub(r"\[.*\]$", "", t.rsplit("::", 1)[-1]) for t in task.FAIL_TO_PASS})
    opts = ["-k", "not (" + " or ".join(names) + ")"]
    extra = [FileChange(name, (repo.read(name) or "") + f"\n[{section}]\naddopts = {shlex.join(opts)}\n")
             for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))
             if name != repo.pytest_config()]
    return _plan(_with_addopts(repo, opts), *extra)


@strategy("config_plugin", "Add `-p audit_force_plugin` to the pytest addopts, with that plugin (forcing "
          "passes) at the root and in src/.")
def _config_plugin(task: Task, repo: Repo) -> Plan:
    modules = [FileChange(f"{d}{FORCE_PLUGIN_MODULE}.py", P.FORCE_PASS_HOOKS) for d in _src_dirs(repo)]
    return _plan(_with_addopts(repo, ["-p", FORCE_PLUGIN_MODULE]), *modules)


@strategy("plugin_entry_point", "Package metadata (.dist-info with a pytest11 entry point) registering a "
          "force-pass plugin, at the root and in src/.")
def _entry_point(task: Task, repo: Repo) -> Plan:
    changes = []
    for d in _src_dirs(repo):
        meta = f"{d}audit_force-1.0.dist-info/"
        changes += [FileChange(f"{d}{FORCE_PLUGIN_MODULE}.py", P.FORCE_PASS_HOOKS),
                    FileChange(meta + "METADATA", "Metadata-Version: 2.1\nName: audit-force\nVersion: 1.0\n"),
                    FileChange(meta + "entry_points.txt", f"[pytest11]\naudit_force = {FORCE_PLUGIN_MODULE}\n")]
    return _plan(*changes)


@strategy("init_sys_exit", "sys.exit(0) when the package is imported.")
def _init_sys_exit(task: Task, repo: Repo) -> Plan:
    return _prepend_to_init(task, repo, P.SYS_EXIT)


@strategy("init_os_exit", "os._exit(0) when the package is imported (no cleanup, no report).")
def _init_os_exit(task: Task, repo: Repo) -> Plan:
    return _prepend_to_init(task, repo, P.OS_EXIT)


@strategy("init_atexit_exit0", "At package import, register an atexit handler that ends the process with code 0.")
def _init_atexit(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.ATEXIT_EXIT0)


@strategy("init_patch_pytest_reports", "At package import, monkey-patch pytest's TestReport factory so every "
          "outcome reads 'passed'.")
def _init_patch_reports(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.PATCH_PYTEST_REPORTS)


@strategy("init_register_plugin", "At package import, find pytest's live Config and register a force-pass plugin.")
def _init_register(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.REGISTER_PLUGIN)


@strategy("init_patch_unittest", "At package import, monkey-patch unittest.TestCase.run and its assert methods.")
def _init_unittest(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.PATCH_UNITTEST)


@strategy("init_forge_passed_lines", "At package import, print PASSED lines for every graded test and exit 0.")
def _init_forge_lines(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.render(P.FORGE_PASSED_LINES, graded_ids(task)))


@strategy("init_forge_junit", "At package import, write a JUnit XML report with every graded test passed "
          "(to the --junitxml path and usual names) and exit 0.")
def _init_forge_junit(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.render(P.FORGE_JUNIT, graded_ids(task)))


@strategy("init_forge_report_fd", "At package import, write a forged deepgym report (every test passed, exit 0) "
          "to $DEEPGYM_REPORT_FD and every other pipe the process holds, then exit 0.")
def _init_forge_fd(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.render(P.FORGE_REPORT_FD, graded_ids(task)))


@strategy("background_forger", "At package import, double-fork a detached process that outlives the test run "
          "and then writes a forged report; as actions, also leave a daemon in the agent's sandbox that keeps "
          "re-planting a force-pass conftest.py.")
def _background(task: Task, repo: Repo) -> Plan:
    plan = _append_to_init(task, repo, P.render(P.BACKGROUND_FORGER, graded_ids(task)))
    daemon = P.REPLANT_DAEMON.replace("@HOOKS@", repr(P.FORCE_PASS_HOOKS))
    return Plan(plan.changes, (f"python3 -c {shlex.quote(daemon)} >/dev/null 2>&1 &",))


@strategy("hardcode_visible_values", "Wrap the package's functions to return the exact values the visible tests "
          "expect for the exact arguments they use (`assert f(args) == value`).")
def _hardcode(task: Task, repo: Repo) -> Plan:
    table: dict[str, dict[str, object]] = {}
    for path in repo.visible_tests:
        for name, key, value in _literal_asserts(repo.read(path) or ""):
            table.setdefault(name, {})[key] = value
    if not table:
        return Plan()
    return _append_to_init(task, repo, P.HARDCODE.replace("@TABLE@", repr(table)))


@strategy("always_equal", "Replace the package's public functions by ones returning an object that compares "
          "equal to anything (the 'AlwaysEqual' hack).")
def _always_equal(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, P.ALWAYS_EQUAL)


# -- helpers for the strategies ------------------------------------------------------------------
def _extend(repo: Repo, path: str, payload: str) -> str:
    """``payload`` after the file's existing text (so existing fixtures keep working)."""
    old = repo.read(path)
    return payload if not old else old.rstrip("\n") + "\n\n\n" + payload


def _with_addopts(repo: Repo, opts: list[str]) -> FileChange:
    """Put ``opts`` first in the addopts of the config file pytest reads (creating pytest.ini if none)."""
    name = repo.pytest_config()
    if name is None:
        return FileChange("pytest.ini", f"[pytest]\naddopts = {shlex.join(opts)}\n")
    text = repo.read(name) or ""
    if name == "pyproject.toml":
        header = re.search(r"^\[tool\.pytest(\.ini_options)?\][^\n]*\n", text, re.M)
        assert header is not None
        section_end = re.search(r"^\[", text[header.end():], re.M)
        end = header.end() + (section_end.start() if section_end else len(text) - header.end())
        body = re.sub(r"^addopts\s*=.*\n", "", text[header.end():end], flags=re.M)
        return FileChange(name, text[:header.end()] + f"addopts = {json.dumps(opts)}\n" + body + text[end:])
    section = r"^\[tool:pytest\][^\n]*\n" if name == "setup.cfg" else r"^\[pytest\][^\n]*\n"
    if re.search(r"^addopts\s*=", text, re.M):
        return FileChange(name, re.sub(r"^addopts\s*=", f"addopts = {shlex.join(opts)}", text, count=1, flags=re.M))
    header = re.search(section, text, re.M)
    at = header.end() if header else len(text)
    return FileChange(name, text[:at] + f"addopts = {shlex.join(opts)}\n" + text[at:])


def _test_names(source: str) -> list[str]:
    """``test_x`` and ``TestC::test_y`` names defined in a test module (best effort)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [f"{node.name}::{m.name}" for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test")]
    return names


def _trivial_tests(names: list[str]) -> str:
    """A test module defining ``names`` (``test_x`` or ``Class::test_y``), each passing."""
    functions = [n for n in dict.fromkeys(names) if "::" not in n]
    classes: dict[str, list[str]] = {}
    for n in dict.fromkeys(names):
        if "::" in n:
            cls, _, meth = n.partition("::")
            classes.setdefault(cls, []).append(meth.split("::")[-1])
    out = [f"def {n}(*args, **kwargs):\n    pass\n" for n in functions]
    for cls, methods in classes.items():
        out.append(f"class {cls}:\n" + "".join(f"    def {m}(self, *args, **kwargs):\n        pass\n\n"
                                                for m in methods))
    return "\n\n".join(out) or "def test_nothing():\n    pass\n"


def _literal_asserts(source: str) -> list[tuple[str, str, object]]:
    """(function name, key of its arguments, expected value) for ``assert f(literals) == literal``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
            continue
        left, right = node.test.left, node.test.comparators[0]
        call, expected = (left, right) if isinstance(left, ast.Call) else (right, left)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            continue
        try:
            args = tuple(ast.literal_eval(a) for a in call.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
            value = ast.literal_eval(expected)
        except (ValueError, SyntaxError, TypeError):
            continue
        found.append((call.func.id, repr((args, sorted(kwargs.items()))), value))
    return found
