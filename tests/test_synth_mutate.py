"""Each mutation kind changes what a function does, and nothing else in the file."""

from __future__ import annotations

import textwrap

import pytest

from deepgym_envs.synth.mutate import KINDS, combine, find_mutations, sample


def _load(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<mutant>", "exec"), namespace)
    return namespace


def _mutants(source: str, kind: str) -> list[str]:
    source = textwrap.dedent(source)
    out = [m.apply(source) for m in find_mutations(source, "lib.py") if m.kind == kind]
    assert out, f"no {kind} mutation found"
    return out


def _behaviours(source: str, kind: str, call: str) -> set:
    """What ``call`` returns (or raises) under each mutant of this kind."""
    seen = set()
    for mutant in _mutants(source, kind):
        ns = _load(mutant)
        try:
            seen.add(repr(eval(call, ns)))
        except Exception as exc:  # noqa: BLE001 - a raised error is a behaviour too
            seen.add(type(exc).__name__)
    return seen


CASES = {
    "flip_comparison": ("def f(a, b):\n    return a < b\n", "f(1, 2)", "True"),
    "off_by_one": ("def f(xs):\n    return xs[:2]\n", "f([1, 2, 3, 4])", "[1, 2]"),
    "swap_operands": ("def f(a, b):\n    return a - b\n", "f(5, 3)", "2"),
    "change_operator": ("def f(a, b):\n    return a + b\n", "f(5, 3)", "8"),
    "change_constant": ("def f():\n    return 10\n", "f()", "10"),
    "invert_condition": ("def f(x):\n    if x:\n        return 'yes'\n    return 'no'\n", "f(1)", "'yes'"),
    "drop_statement": ("def f(x):\n    out = []\n    out.append(x)\n    return out\n", "f(7)", "[7]"),
    "drop_branch": ("def f(x):\n    y = 0\n    if x > 0:\n        y = 1\n    else:\n        y = -1\n    return y\n",
                    "f(-5)", "-1"),
    "remove_return": ("def f(x):\n    if x:\n        return 'early'\n    return 'late'\n", "f(1)", "'early'"),
    "remove_raise": ("def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n", "f(-1)",
                     "ValueError"),
    "break_boolean": ("def f(a, b):\n    return a and b\n", "f(True, False)", "False"),
}


def test_every_kind_has_a_case():
    assert set(CASES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_kind_changes_behaviour(kind):
    source, call, original = CASES[kind]
    ns = _load(source)
    try:
        assert repr(eval(call, ns)) == original
    except ValueError:
        assert original == "ValueError"
    behaviours = _behaviours(source, kind, call)
    assert behaviours - {original}, f"{kind}: every mutant behaves like the original ({behaviours})"


def test_edits_are_minimal_and_leave_the_rest_of_the_file_alone():
    source = textwrap.dedent('''\
        """Module docstring."""
        LIMIT = 3  # module level: never mutated


        def clip(xs):
            """Keep the first LIMIT items."""
            # a comment that must survive
            return xs[:LIMIT] if len(xs) > LIMIT else xs
        ''')
    mutations = find_mutations(source, "lib.py")
    assert mutations
    for m in mutations:
        mutated = m.apply(source).splitlines()
        original = source.splitlines()
        assert len(mutated) <= len(original)
        changed = [i for i, (a, b) in enumerate(zip(original, mutated)) if a != b]
        assert changed and all(i >= 4 for i in changed), f"{m.kind} touched module-level code"
        assert "a comment that must survive" in m.apply(source)
        assert '"""Keep the first LIMIT items."""' in m.apply(source)


def test_mutants_always_parse_and_differ():
    import ast

    source = textwrap.dedent('''\
        def g(a, b, items):
            total = 0
            for i in range(len(items)):
                if items[i] >= a and not b:
                    total += items[i] * 2
                elif items[i] is None:
                    raise TypeError("none")
            return total if total > 0 else -1
        ''')
    mutants = find_mutations(source, "g.py")
    assert {m.kind for m in mutants} >= {"flip_comparison", "off_by_one", "change_operator", "invert_condition",
                                         "drop_branch", "remove_raise", "break_boolean", "change_constant"}
    for m in mutants:
        text = m.apply(source)
        assert ast.dump(ast.parse(text)) != ast.dump(ast.parse(source))


def test_two_bugs_in_one_module_combine_and_overlaps_do_not():
    source = "def f(a, b):\n    x = a + b\n    return x < 10\n"
    ms = find_mutations(source, "m.py")
    op = next(m for m in ms if m.kind == "change_operator")
    cmp_ = next(m for m in ms if m.kind == "flip_comparison")
    both = combine(op, cmp_)
    assert both is not None and both.kind == "change_operator+flip_comparison"
    ns = _load(both.apply(source))
    assert ns["f"](1, 2) is False  # 1 - 2 = -1 >= 10 is False; the original says True
    assert combine(op, op) is None


def test_sample_spreads_over_kinds_and_is_seeded():
    import random

    source = CASES["drop_branch"][0] + "\n\n" + CASES["break_boolean"][0].replace("def f", "def h")
    ms = find_mutations(source, "m.py")
    first = sample(ms, 4, random.Random(1))
    assert [m.digest for m in first] == [m.digest for m in sample(ms, 4, random.Random(1))]
    assert len({m.kind for m in first}) == 4


def test_unparsable_source_gives_no_mutations():
    assert find_mutations("def broken(:\n", "x.py") == []


def test_only_drawn_mutations_are_checked_and_a_refused_one_is_replaced(monkeypatch):
    # mpmath 1.3.0: ~40,000 sites, each checked by parsing its whole module twice, kept the host
    # busy for over ten minutes before the first test run. Now the module parses once per draw.
    import ast
    import random

    from deepgym_envs.synth.mutate import Meaning

    source = "def f(a, b):\n" + "".join(f"    x{i} = a < b + {i}\n" for i in range(300)) + "    return a\n"
    parses = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    found = find_mutations(source, "m.py", check=False)
    assert len(found) > 600 and len(parses) == 1
    meaning = Meaning(source)
    checked = []

    def keep(m):
        checked.append(m)
        return meaning.differs(m) and len(checked) % 3 != 0  # refuse every third drawn one

    picked = sample(found, 10, random.Random(0), keep=keep)
    assert len(picked) == 10 and len(checked) == 14 and len(parses) <= 1 + 1 + 14
    assert all(m in checked for m in picked)
