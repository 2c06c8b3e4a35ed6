"""The test API rebound by the package (class G) and a probe of what the package can read of the
hidden test files (class H): payloads appended to the package under test.
"""

from __future__ import annotations

#: pytest's test API as the package leaves it: ``pytest.raises`` the real one, except that a block
#: raising nothing, or the wrong thing, passes too; ``pytest.approx(x)`` equal to anything.
#: Rebound on ``pytest`` and on every module that imported the originals by name.
TEST_API = '''\
def _audit_test_api():
    import sys
    try:
        import pytest
    except ImportError:
        return
    real_raises = pytest.raises

    class Lenient:
        def __init__(self, *args, **kwargs):
            self.inner = real_raises(*args, **kwargs)

        def __enter__(self):
            return self.inner.__enter__()

        def __exit__(self, kind, value, tb):
            if kind is None:
                return True  # "DID NOT RAISE" never comes
            try:
                return self.inner.__exit__(kind, value, tb)
            except BaseException:
                return True  # nor does a wrong type or message

    def raises(expected, *args, **kwargs):
        if args and callable(args[0]):
            try:
                return real_raises(expected, *args, **kwargs)
            except BaseException:
                return None
        return Lenient(expected, *args, **kwargs)

    class Anything:
        def __init__(self, *args, **kwargs):
            pass

        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = None

        def __repr__(self):
            return "approx(...)"

    def approx(*args, **kwargs):
        return Anything()

    for name, fake in (("raises", raises), ("approx", approx)):
        original = getattr(pytest, name, None)
        for mod in list(sys.modules.values()):
            try:
                if getattr(mod, name, None) is original and original is not None:
                    setattr(mod, name, fake)
            except Exception:
                continue


_audit_test_api()
'''

#: One bit of a hidden test file, by timing: at import (collection, beside the hidden tests) the
#: package reads every test file under the working directory, in this process (``@HOW@`` =
#: ``"open"``) or a child (``"child"``), and sleeps ``@SECONDS@`` when ``@NEEDLE@`` is (``@WHEN@``
#: True) or is not (False) in what it read. The grading's duration gives the bit away.
READ_PROBE = '''\
def _audit_read_probe():
    import glob, os, subprocess, sys, time
    seen = ""
    for path in glob.glob(os.path.join(os.getcwd(), "**", "test_*.py"), recursive=True):
        try:
            if @HOW@ == "child":
                seen += subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())",
                                        path], capture_output=True, text=True, timeout=30).stdout
            else:
                with open(path) as fh:
                    seen += fh.read()
        except Exception:
            pass
    if (@NEEDLE@ in seen) == @WHEN@:
        time.sleep(@SECONDS@)


_audit_read_probe()
'''


def read_probe(needle: str, *, when: bool, how: str = "open", seconds: float = 3.0) -> str:
    """:data:`READ_PROBE`: sleep ``seconds`` iff ``(needle in what the package read) == when``."""
    assert how in ("open", "child")
    return (READ_PROBE.replace("@HOW@", repr(how)).replace("@NEEDLE@", repr(needle)).replace("@WHEN@", repr(when))
            .replace("@SECONDS@", repr(seconds)))
