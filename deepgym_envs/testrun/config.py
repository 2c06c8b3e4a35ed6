"""Which files pytest reads as configuration, and which one it reads in a pristine grading view.

The list comes from pytest itself (the names ``_pytest.config.findpaths`` searches, in its order),
so a pytest that learns a new file name (pytest 9 reads ``pytest.toml`` and ``.pytest.toml``
first) is covered without a change here; a fixed floor is kept in case pytest's source cannot be
read. Grading then runs pytest with the configuration the pristine tree would give, named
explicitly (``-c FILE --rootdir DIR``): a configuration file the change added, under any name,
is not even looked at.
"""

from __future__ import annotations

import ast
import functools
import inspect
import posixpath
import tempfile
from pathlib import Path
from typing import Callable

from deepgym_envs.errors import ToolError
from deepgym_envs.sandbox import Sandbox

#: Names every pytest since 3 reads (pytest 9's added in front); pytest's own list is added to it.
FLOOR = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
#: Options by which a task's own command already chooses the configuration: then it is left alone.
_CHOOSERS = ("-c", "--config-file", "--inifile", "--rootdir")


@functools.lru_cache(maxsize=1)
def config_file_names() -> tuple[str, ...]:
    """pytest's configuration file names in its search order (then any floor name it lacks)."""
    names: list[str] = []
    try:
        from _pytest.config import findpaths

        tree = ast.parse(inspect.getsource(findpaths))
    except (ImportError, OSError, SyntaxError, TypeError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if (isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple))
                and any(isinstance(t, ast.Name) and t.id == "config_names" for t in node.targets)):
            names += [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(dict.fromkeys([*names, *FLOOR]))


def chooses_config(args: list[str]) -> bool:
    """Whether pytest arguments already name a configuration file or root directory."""
    return any(a in _CHOOSERS or a.startswith(tuple(f"{c}=" for c in _CHOOSERS[1:]))
               or (a.startswith("-c") and not a.startswith("--")) for a in args)


def pristine_config_args(sb: Sandbox, files: list[str], pristine: Callable[[str], bool],
                         gold: dict[str, str | None] | None = None) -> list[str]:
    """``["-c", FILE, "--rootdir", DIR]`` for the configuration pytest would pick for ``files``.

    Called on a grading view, after every configuration file the change touched was restored, and
    only paths for which ``pristine(path)`` holds (in the pristine tree, or written by the hidden
    test patch) are considered: a file the change added is never picked, whatever its name, even
    one this pytest's list does not know. A file the gold patch edits is read where ``gold`` says
    the view holds its gold version (the host wrote it, beside the file or in its place; None: the
    gold patch deletes it), never in the agent's version. Found as pytest finds it: from the tests'
    common directory upwards, the first file of pytest's list that has a pytest section, else the
    first ``pyproject.toml``; the root directory is that file's. ``[]`` when the workspace holds
    none (pytest's own fallbacks then apply).
    """
    gold = gold or {}
    dirs = [posixpath.dirname(f) for f in files] or [""]
    base = posixpath.commonpath(["./" + d for d in dirs])[2:] if dirs != [""] else ""
    first_pyproject = None
    while True:
        try:
            kinds = {e.name: e.kind for e in sb.list_dir(base or ".")}
        except ToolError:
            kinds = {}
        for name in config_file_names():
            path = posixpath.join(base, name)
            if path in gold:
                path = gold[path]
                if path is None:
                    continue
            elif kinds.get(name) not in ("file", "link") or not pristine(path):
                continue
            if name == "pyproject.toml" and first_pyproject is None:
                first_pyproject = path
            if _has_pytest_section(sb, path):
                return ["-c", path, "--rootdir", base or "."]
        if not base:
            break
        base = posixpath.dirname(base)
    if first_pyproject is not None:
        return ["-c", first_pyproject, "--rootdir", posixpath.dirname(first_pyproject) or "."]
    return []


def _has_pytest_section(sb: Sandbox, path: str) -> bool:
    """pytest's own reading of the file (a copy on the host: pytest's reader wants a path)."""
    from _pytest.config.findpaths import load_config_dict_from_file

    try:
        data = sb.read_file(path)
    except ToolError:
        return False
    with tempfile.TemporaryDirectory(prefix="deepgym-config-") as tmp:
        copy = Path(tmp) / posixpath.basename(path)
        copy.write_bytes(data)
        try:
            return load_config_dict_from_file(copy) is not None
        except Exception:  # pytest would stop on it too: it is still the file pytest picks
            return True
