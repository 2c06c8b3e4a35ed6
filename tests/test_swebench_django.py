"""Django rows: published runtests.py ids become pytest node ids, and Django's own suite runs under
deepgym's pytest runner (``in_sandbox/deepgym_django.py``), never graded from a log (issue 14).

The end-to-end test builds a real fixture: Django 4.2.15's sdist (which ships the whole test
suite) as the base commit of a mirror, and a row in SWE-bench's shape whose gold patch is 4.2.16's
fix for CVE-2024-45231 (PasswordResetForm logs a failing email backend instead of raising) and
whose test patch is that release's test for it, ids published as runtests prints them.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import requires_namespace
from deepgym_envs.swebench_django import django_node_ids
from deepgym_envs.swebench_specs import spec_for

IN_SANDBOX = Path(__file__).resolve().parent.parent / "deepgym_envs" / "testrun" / "in_sandbox"


def _exists(*paths: str):
    return lambda p: p in paths


def test_old_style_id_is_module_class_and_method():
    ids = django_node_ids(["test_x (auth_tests.test_forms.PasswordResetFormTest)"], {},
                          _exists("tests/auth_tests/test_forms.py"))
    assert ids == {"test_x (auth_tests.test_forms.PasswordResetFormTest)":
                   ["tests/auth_tests/test_forms.py::PasswordResetFormTest::test_x"]}


def test_python_311_style_id_drops_the_repeated_method():
    published = "test_x (template_tests.filter_tests.test_urlize.FunctionTests.test_x)"
    ids = django_node_ids([published], {}, _exists("tests/template_tests/filter_tests/test_urlize.py"))
    assert ids[published] == ["tests/template_tests/filter_tests/test_urlize.py::FunctionTests::test_x"]


def test_a_module_that_is_a_package_is_its_init():
    published = "test_form (forms_tests.tests.FormsTestCase)"
    ids = django_node_ids([published], {}, _exists("tests/forms_tests/tests/__init__.py"))
    assert ids[published] == ["tests/forms_tests/tests/__init__.py::FormsTestCase::test_form"]


def test_docstring_id_is_the_method_whose_docstring_starts_with_it():
    text = ('class A(TestCase):\n'
            '    def test_one(self):\n'
            '        """\n        Nonexistent email is no error. This should not fail because it would\n'
            '        expose information.\n        """\n\n'
            '    def test_two(self):\n        """Other."""\n\n'
            '    def helper(self):\n        """Nonexistent email is no error."""\n')
    published = "Nonexistent email is no error. This should not fail because it would"
    ids = django_node_ids([published], {"tests/app/tests.py": text}, _exists("tests/app/tests.py"))
    assert ids[published] == ["tests/app/tests.py::A::test_one"]


def test_unmatched_ids_map_to_nothing():
    ids = django_node_ids(["test_gone (gone.tests.A)", "No test has this docstring", "test_x (A)"],
                          {"tests/app/tests.py": "class A:\n    def test_x(self):\n        pass\n"},
                          _exists("tests/app/tests.py"))
    assert ids == {"test_gone (gone.tests.A)": [], "No test has this docstring": [], "test_x (A)": []}


def _plugin():
    spec = importlib.util.spec_from_file_location("deepgym_django_under_test", IN_SANDBOX / "deepgym_django.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plugin_labels_are_runtests_labels_of_the_files(tmp_path):
    """What SWE-bench's harness hands runtests.py for a test patch's files, node ids included."""
    plugin = _plugin()
    (tmp_path / "tests" / "app" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "runtests.py").write_text("")
    tests = plugin.find_tests_dir(["tests/app/sub/test_x.py::A::test_y"], str(tmp_path))
    assert tests == str(tmp_path / "tests")
    args = ["tests/app/sub/test_x.py::A::test_y", "tests/mail/custombackend.py", "tests/pkg/tests/__init__.py",
            "setup.py", "tests/app/sub/test_x.py"]
    assert plugin.runtests_labels(args, str(tmp_path), tests) == ["app.sub.test_x", "mail.custombackend",
                                                                 "pkg.tests"]


def test_plugin_leaves_out_files_that_are_no_python_source(tmp_path):
    plugin = _plugin()
    (tmp_path / "tests" / "app" / "templates").mkdir(parents=True)
    (tmp_path / "tests" / "app" / "templates" / "x.html").write_text("{{ x }}")
    (tmp_path / "tests" / "app" / "tests.py").write_text("")
    args = ["tests/app/tests.py", "tests/app/templates/x.html", "tests/app/tests.py::A::test_b", "tests/app"]
    assert plugin.data_files(args, str(tmp_path)) == ["tests/app/templates/x.html"]


def test_django_table_runs_the_suite_under_the_plugin():
    spec = spec_for("django/django", "4.2")
    assert spec.parser == "django" and "deepgym_django" in spec.test_cmd and spec.python == "3.9"
    assert [spec_for("django/django", v).key for v in ("1.9", "3.2", "5.0")] == [
        "django/django@1.9", "django/django@3.2", "django/django@5.0"]


# --- end to end: a real Django fix, imported and graded -------------------------------------

BASE, FIXED = "4.2.15", "4.2.16"
FIX_FILES = ["django/contrib/auth/forms.py"]
TEST_FILES = ["tests/auth_tests/test_forms.py", "tests/mail/custombackend.py"]
F2P = ["test_save_send_email_exceptions_are_catched_and_logged (auth_tests.test_forms.PasswordResetFormTest)"]
P2P = ["test_cleaned_data (auth_tests.test_forms.PasswordResetFormTest)",
       "test_custom_email_field (auth_tests.test_forms.PasswordResetFormTest.test_custom_email_field)",
       "Test nonexistent email address. This should not fail because it would",
       "test_success (auth_tests.test_forms.AdminPasswordChangeFormTest)",
       "test_table_exists (auth_tests.test_module_model.NoteTests)"]
#: Not part of the upstream fix: a model only a test module defines must get its table (runtests
#: builds its suite, importing the module, before it creates the test databases), and a template
#: the test patch adds is handed to the run (as the harness hands it to runtests) without stopping it.
MODULE_MODEL_TEST = """diff --git a/tests/auth_tests/test_module_model.py b/tests/auth_tests/test_module_model.py
new file mode 100644
--- /dev/null
+++ b/tests/auth_tests/test_module_model.py
@@ -0,0 +1,15 @@
+from django.db import models
+from django.test import TestCase
+
+
+class Note(models.Model):
+    text = models.TextField()
+
+    class Meta:
+        app_label = "auth_tests"
+
+
+class NoteTests(TestCase):
+    def test_table_exists(self):
+        Note.objects.create(text="x")
+        self.assertEqual(Note.objects.count(), 1)
diff --git a/tests/auth_tests/templates/note.html b/tests/auth_tests/templates/note.html
new file mode 100644
--- /dev/null
+++ b/tests/auth_tests/templates/note.html
@@ -0,0 +1 @@
+{{ note.text }}
"""
_GIT = ["git", "-c", "user.name=fixture", "-c", "user.email=fixture@localhost", "-c", "commit.gpgsign=false"]
_SKIPPED = ("docs", "js_tests", "extras", "PKG-INFO", "Django.egg-info")


def _sdists() -> dict[str, Path]:
    """Django's sdists at both versions (kept across runs in the temp directory), or skip."""
    cache = Path(tempfile.gettempdir()) / "deepgym-test-django-sdists"
    cache.mkdir(exist_ok=True)
    found = {v: cache / f"Django-{v}.tar.gz" for v in (BASE, FIXED)}
    missing = [v for v, p in found.items() if not p.is_file()]
    if missing:
        try:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                   "-d", str(cache), *(f"django=={v}" for v in missing)],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("PyPI is unreachable: Django's sdists (the fixture) could not be downloaded")
        if done.returncode != 0 or not all(p.is_file() for p in found.values()):
            pytest.skip(f"PyPI is unreachable: Django's sdists could not be downloaded ({done.stderr[-300:]})")
    return found


def _git(repo: Path, *args: str) -> str:
    return subprocess.run([*_GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _unpack(sdist: Path, dest: Path) -> None:
    for path in dest.iterdir():
        if path.name != ".git":
            subprocess.run(["rm", "-rf", str(path)], check=True)
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not rel or rel.split("/")[0] in _SKIPPED or not member.isfile():
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(tar.extractfile(member).read())


@pytest.fixture(scope="module")
def django_task(tmp_path_factory: pytest.TempPathFactory):
    from deepgym_envs.swebench_import import import_rows
    from deepgym_envs.tasks import load_tasks

    from deepgym_envs.errors import InfrastructureError
    from deepgym_envs.pyenv import find_python

    try:
        find_python(spec_for("django/django", "4.2").python)
    except InfrastructureError as exc:
        pytest.skip(str(exc))
    sdists = _sdists()
    root = tmp_path_factory.mktemp("django")
    repo = root / "mirrors" / "django__django"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "--initial-branch=main")
    commits = {}
    for version in (BASE, FIXED):  # the fix lands after the base commit, as upstream
        _unpack(sdists[version], repo)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"Django {version}")
        commits[version] = _git(repo, "rev-parse", "HEAD").strip()
    row = {"repo": "django/django", "instance_id": "django__django-45231", "base_commit": commits[BASE],
           "patch": _git(repo, "diff", commits[BASE], commits[FIXED], "--", *FIX_FILES),
           "test_patch": _git(repo, "diff", commits[BASE], commits[FIXED], "--", *TEST_FILES) + MODULE_MODEL_TEST,
           "problem_statement": "PasswordResetForm lets a failing email backend's exception through, which "
                                "tells an attacker which emails have accounts.",
           "hints_text": "", "created_at": "2024-09-03T00:00:00Z", "version": "4.2",
           "FAIL_TO_PASS": json.dumps(F2P), "PASS_TO_PASS": json.dumps(P2P),
           "environment_setup_commit": commits[BASE]}
    (root / "rows.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(root / "rows.jsonl", root / "set", root / "mirrors")
    assert [(r.status, r.spec) for r in report.rows] == [("imported", "django/django@4.2")], report.rows
    [task] = load_tasks(root / "set")
    return task


@pytest.mark.slow
def test_django_row_imports_with_node_ids_and_grades_gold_resolved_and_empty_unresolved(django_task):
    from deepgym_envs.grading import grade

    task = django_task
    forms = "tests/auth_tests/test_forms.py"
    assert task.FAIL_TO_PASS == [f"{forms}::PasswordResetFormTest::test_save_send_email_exceptions_are_catched_and_logged"]
    assert task.PASS_TO_PASS == [f"{forms}::PasswordResetFormTest::test_cleaned_data",
                                 f"{forms}::PasswordResetFormTest::test_custom_email_field",
                                 f"{forms}::PasswordResetFormTest::test_nonexistent_email",
                                 f"{forms}::AdminPasswordChangeFormTest::test_success",
                                 "tests/auth_tests/test_module_model.py::NoteTests::test_table_exists"]
    gold = grade(task, task.patch, backend="namespace")
    assert gold.status == "resolved" and not gold.tampered, (gold.reason, gold.log[-3000:])
    empty = grade(task, "", backend="namespace")
    assert empty.status == "unresolved" and not empty.tampered, (empty.reason, empty.log[-3000:])
    assert empty.tests[task.FAIL_TO_PASS[0]] == "failed"
    assert all(empty.tests[t] == "passed" for t in task.PASS_TO_PASS)


@pytest.mark.slow
def test_django_row_grades_the_same_on_a_warm_server(django_task):
    """The warm server loads the plugin as the cold runner does: same verdicts, no cold fallback."""
    from deepgym_envs.grading import grade
    from deepgym_envs.sandbox.pool import ViewPool
    from deepgym_envs.testrun.warm import warm_server

    task = django_task
    with ViewPool() as pool:
        for patch, status in ((task.patch, "resolved"), ("", "unresolved")):
            verdict = grade(task, patch, backend="namespace", views=pool)
            assert (verdict.status, verdict.tampered) == (status, False), (verdict.reason, verdict.log[-3000:])
        (sb,) = [entry[1] for entry in pool._idle.values()]
        assert warm_server(sb).runs == 2 and warm_server(sb).fallbacks == 0


@pytest.mark.slow
def test_django_row_validates_and_traces_its_test_map(django_task):
    """``tasks validate --record-maps``: the tracer loads the plugin too, and traces every hidden test."""
    from deepgym_envs.validate import validate_task

    result = validate_task(django_task, record_map=True)
    assert result.valid, result.problems
    assert set(result.test_map.tests) == {*django_task.FAIL_TO_PASS, *django_task.PASS_TO_PASS}


# --- the plugin in a sandbox, over a stand-in for Django (no network) ---------------------

_STANDIN = {
    "django/__init__.py": "",
    "django/test/__init__.py": "",
    "django/test/runner.py": (
        "def _log(what):\n    with open('events.log', 'a') as fh:\n        fh.write(what + '\\n')\n\n\n"
        "class DiscoverRunner:\n    def __init__(self, **kwargs):\n        pass\n\n"
        "    def setup_test_environment(self):\n        _log('environment')\n\n"
        "    def setup_databases(self):\n        _log('databases')\n"
        # As Django's mark_expected_failures_and_skips, once per test database.
        "        import sys, unittest\n        cls = sys.modules['app.tests'].AppTests\n"
        "        for alias in ('default', 'other'):\n"
        "            cls.test_backend_cannot = unittest.skip('backend')(cls.test_backend_cannot)\n"
        "        return 'old'\n\n"
        "    def teardown_databases(self, old):\n        _log('drop ' + old)\n\n"
        "    def teardown_test_environment(self):\n        _log('environment down')\n"),
    "tests/runtests.py": (
        "import os\nimport sys\n\nfrom django.test.runner import _log\n\n\n"
        "def setup_run_tests(verbosity, start_at, start_after, test_labels=None):\n"
        "    _log('setup %s %s %s' % (','.join(test_labels), os.environ['DJANGO_SETTINGS_MODULE'],\n"
        "                             sys.path[0] == os.path.dirname(os.path.abspath(__file__))))\n"
        "    return test_labels, 'state'\n\n\n"
        "def teardown_run_tests(state):\n    _log('teardown ' + state)\n\n\n"
        "if __name__ == '__main__':\n    _log('command line ran')\n"),
    "tests/app/__init__.py": "",
    "tests/app/templates/page.html": "{{ x }}\n",
    "tests/app/tests.py": (
        "import unittest\n\nfrom django.test.runner import _log\n\n\n"
        "class AppTests(unittest.TestCase):\n    def test_after_setup(self):\n"
        "        _log('test')\n        with open('events.log') as fh:\n"
        "            self.assertIn('databases', fh.read())\n\n"
        "    def test_backend_cannot(self):\n        self.fail('runs only where the backend can')\n"),
    # A module of the workspace by the plugin's name: the support folder's file is loaded instead.
    "deepgym_django.py": "open('shadow-ran', 'w').close()\nraise SystemExit(3)\n",
}


@requires_namespace
@pytest.mark.parametrize("warm", [False, True])
def test_plugin_runs_runtests_setup_around_the_tests_in_a_sandbox(tmp_path, warm):
    """``-p deepgym_django``: runtests' set-up with the files' labels, the settings module and
    ``tests/`` first on the path, databases after collection, every teardown; a test the backend
    skips at database creation skipped, not read as tampering; the support folder's plugin, never a
    workspace module of that name; runtests' command line never runs."""
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.testrun import run_pytest

    for rel, text in _STANDIN.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "stand-in")
    with make_sandbox(tmp_path, "namespace", pythonpath=(".",)) as sb:  # Django imports from the root
        report, result = run_pytest(sb, ["-p", "deepgym_django", "tests/app/tests.py", "tests/app/templates/page.html"],
                                    120, warm=warm)
        assert report is not None, result.stdout + result.stderr
        assert report["tests"] == {"tests/app/tests.py::AppTests::test_after_setup": "passed",
                                   "tests/app/tests.py::AppTests::test_backend_cannot": "skipped"}
        assert not report["tampered"], report["tampered"]
        assert sb.read_file("events.log").decode().splitlines() == [
            "setup app.tests test_sqlite True", "environment", "databases", "test", "drop old", "environment down",
            "teardown state"]
        assert not sb.exists("shadow-ran")


STAND_IN = r'''
import sys
namespace = {"__name__": "deepgym_django"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
assert "ctypes" not in sys.modules
with namespace["_ctypes_stand_in"]():
    import ctypes
    assert ctypes.c_int == "i" and not hasattr(ctypes, "CDLL") and not hasattr(ctypes, "pythonapi")
assert "ctypes" not in sys.modules  # a later import is the real module's, or the seal's refusal
import ctypes
assert hasattr(ctypes, "CDLL")
'''


def test_django_s_runner_gets_a_ctypes_without_raw_memory_only_while_it_is_imported():
    """Django 4.x's test runner imports ctypes at its top (for the parallel runner's counter),
    which the seal refuses to everyone: every Django 4 row was no_verdict ('ctypes' refused at
    django/test/runner.py:2) before the plugin gave it a stand-in for that import alone."""
    import deepgym_envs.testrun

    plugin = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_django.py"
    done = subprocess.run([sys.executable, "-c", STAND_IN, str(plugin)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
