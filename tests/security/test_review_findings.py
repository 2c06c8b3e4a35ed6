"""Red-team review of the seal (deepgym_lockdown.py): attacks that get past it. Each test fails
while the attack works (the toy task graded ``resolved`` with its bug in place, nothing tampered).

* Thread laundering: an audited call made by C code in a thread whose target is C-only (a
  ``functools.partial`` over ``itertools.starmap``) has only ``threading``'s frames on its stack, so
  "who asks" finds no project frame and answers LIBRARY: ``sys._current_frames()`` gives the test's
  frame, ``getattr(frame, "f_code")`` its code object, ``__code__`` of a test function works too.
  The repository's own code oracle (audit strategy ``oracle_code_objects``) with its three reads
  done this way resolves the toy and 19 of the 36 built-in tasks, nothing tampered (namespace
  backend, a91e941; the same oracle unlaundered resolves none of those it was tried on).
  The same thread also imports ctypes (then in sys.modules for everyone), reads raw memory
  (ctypes.string_at) and walks gc.get_objects().
* Test-frame laundering: a C callable set as a dunder (``__add__ = functools.partial(...)``, not a
  descriptor, so called with the operand only) runs with the test's frame on top of the stack, so
  ``sys._getframe`` / ``f_code`` read through it are asked by "the tests".
* An always-equal result: the canaries compare ``(result, x) == (result, wrong)``, which no
  ``__eq__`` of the result takes part in, so nothing sees a result object that agrees with anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_envs import grade
from deepgym_envs.audit.sealed.code_oracle import CODE_ORACLE
from deepgym_envs.tasks import task_from_row
from tests.conftest import requires_namespace, toy_row, write_toy_repo
from tests.security.test_forgery import append_to_init

F2P = "tests/test_ops.py::test_clamp_above"

_LAUNDER = '''
import functools as _ft, itertools as _it, threading as _th, sys as _sys, types as _types
_MARK = object()
def _lib(fn, *args):
    box = []
    t = _th.Thread(target=_ft.partial(box.extend, _it.starmap(fn, [args])))
    t.start(); t.join()
    if not box:
        raise LookupError("refused")
    return box[0]
def _caller():
    frame = _dg.lib(_sys._current_frames)[_th.get_ident()]
    while frame is not None and frame.f_locals.get("__dg_mark__") is not _MARK:
        frame = frame.f_back
    return frame.f_back
def _fcode(frame):
    return _dg.lib(getattr, frame, "f_code")
_dg = _types.SimpleNamespace(lib=_lib, caller=_caller, fcode=_fcode)
del _lib, _caller, _fcode
'''


def thread_oracle() -> str:
    """CODE_ORACLE with sys._getframe(1), frame.f_code and a test function's __code__ read through threads."""
    s = CODE_ORACLE.replace("frame = sys._getframe(1)", "__dg_mark__ = _MARK\n            frame = _dg.caller()")
    s = s.replace("frame.f_code", "_dg.fcode(frame)")
    s = s.replace('getattr(getattr(obj, "__func__", obj), "__code__", None)',
                  '_dg.lib(getattr, getattr(obj, "__func__", obj), "__code__", None)')
    assert "_dg.caller()" in s and "_dg.fcode(frame)" in s
    return _LAUNDER + s


#: The caller's code object from a C-only ``__add__`` run with the test's frame on top.
DUNDER_ORACLE = '''
import functools as _ft, sys as _sys
import calc.ops as _ops


class _Leak(dict):
    def __eq__(self, other):
        code = next(iter(self))
        return other in code.co_consts  # the hidden assert's expected value, from the test's code

    __hash__ = None


def clamp(x, lo, hi, _real=_ops.clamp):
    class R(int):
        pass

    R.__add__ = _ft.partial(_Leak.fromkeys, map(getattr, map(_sys._getframe, [0]), ["f_code"]))
    return R(_real(x, lo, hi))
'''

ALWAYS_EQUAL = '''
import calc.ops as _ops


class _Any:
    def __eq__(self, other):
        return True

    __hash__ = None


class _R(int):
    def __add__(self, other):
        return _Any()

    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def clamp(x, lo, hi, _real=_ops.clamp):
    return _R(_real(x, lo, hi))
'''


@pytest.fixture
def toy(tmp_path: Path):
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))


@requires_namespace
@pytest.mark.parametrize("payload", [pytest.param(thread_oracle(), id="thread_laundered_code_oracle"),
                                     pytest.param(DUNDER_ORACLE, id="c_dunder_from_test_frame"),
                                     pytest.param(ALWAYS_EQUAL, id="always_equal_result")])
def test_the_package_cannot_resolve_the_toy_without_fixing_it(toy, payload):
    v = grade(toy, append_to_init(payload))
    assert v.status != "resolved", (v.status, v.reason, v.tests)
    assert v.tampered or v.tests.get(F2P) in ("failed", "error", "missing"), (v.reason, v.tests)
