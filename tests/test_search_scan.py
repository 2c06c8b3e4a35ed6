"""The host-side literal search (tools._scan over tools._walk_files): the same output as the
straightforward implementation it replaced, and still never opening what the agent may plant in
its workspace to hold the host (FIFOs, sockets) or to read outside it (symlinks)."""

from __future__ import annotations

import os
import re
import socket
import threading

import pytest

from deepgym_envs.tasks import load_tasks
from deepgym_envs.tools import MAX_SEARCH_MATCHES, _read_head, _scan, _walk_files


def reference_scan(files, rx, base, literal):
    """The implementation before the byte prefilter and chunked reads, kept as the reference."""
    matches, total = [], 0
    for file in files:
        rel = os.path.relpath(file, base)
        try:
            with open(file, "rb") as fh:
                data = fh.read(2 << 20)
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        if literal is not None and literal not in text:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if rx.search(line[:4000]):
                total += 1
                if len(matches) < MAX_SEARCH_MATCHES:
                    matches.append(f"{rel}:{lineno}: {line.strip()[:200]}")
    return matches, total


PATTERNS = ["def ", "import", "return None", "self.", "é", "\ufffd", "x", "no such text anywhere", "\ud800", "\n"]


def both(root, pattern):
    rx = re.compile(re.escape(pattern))
    files = list(_walk_files(str(root)))
    return _scan(files, rx, str(root), pattern), reference_scan(files, rx, str(root), pattern)


@pytest.mark.parametrize("repo", sorted({t.repo_path for t in load_tasks("builtin")}))
@pytest.mark.parametrize("pattern", PATTERNS)
def test_same_output_as_the_reference_on_the_builtin_repos(repo, pattern):
    new, old = both(repo, pattern)
    assert new == old


@pytest.fixture
def tricky_tree(tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 def x\nd\xc3\xa9f \xff\xfe tail\n")
    (tmp_path / "fffd.txt").write_bytes("real \ufffd char\n".encode())
    (tmp_path / "crlf.txt").write_bytes(b"def a\r\nreturn None\r\n\x0bdef b\x0c\n")
    (tmp_path / "binary.bin").write_bytes(b"def \0 x" * 10)
    (tmp_path / "late_nul.txt").write_bytes(b"def " + b"a" * 9000 + b"\0")
    # a match straddling the 2 MiB read limit, and one past it, and a multi-chunk file
    (tmp_path / "big.txt").write_bytes(b"x" * ((2 << 20) - 2) + b"def \ndef \n")
    (tmp_path / "chunky.txt").write_bytes((b"y" * 70000 + b" def z\n") * 3)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "many.txt").write_text("".join(f"self.x {i}\n" for i in range(150)))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "skip.py").write_text("def hidden\n")
    return tmp_path


@pytest.mark.parametrize("pattern", PATTERNS + ["caf", "\xe9f", "def z", "y def"])
def test_same_output_as_the_reference_on_awkward_files(tricky_tree, pattern):
    new, old = both(tricky_tree, pattern)
    assert new == old


def in_thread(fn, *args):
    """Run fn; fail (instead of hanging the test run) if it blocks, as opening a FIFO would."""
    out: list = []
    th = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    th.start()
    th.join(10)
    assert not th.is_alive(), "the scan blocked"
    return out[0]


def test_fifo_socket_and_outward_symlinks_are_not_opened(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("needle inside\n")
    os.mkfifo(ws / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    os.symlink(outside / "secret.txt", ws / "link.txt")
    os.symlink(outside, ws / "linkdir")
    try:
        rx = re.compile("needle")
        files = list(_walk_files(str(ws)))
        assert files == [str(ws / "a.txt")]
        assert in_thread(_scan, files, rx, str(ws), "needle") == (["a.txt:1: needle inside"], 1)
        # The agent may swap a listed file for one of these between the walk and the read.
        for name in ("fifo", "sock", "link.txt", "linkdir"):
            assert in_thread(_read_head, str(ws / name)) is None, name
        assert in_thread(_scan, [str(ws / n) for n in ("fifo", "sock", "link.txt")], rx, str(ws), "needle") == ([], 0)
    finally:
        sock.close()


def test_read_head_is_bounded(tmp_path):
    (tmp_path / "f").write_bytes(b"z" * 300_000)
    assert _read_head(str(tmp_path / "f"), limit=100_000) == b"z" * 100_000
    assert _read_head(str(tmp_path / "f")) == b"z" * 300_000


def test_no_stat_per_file(tricky_tree, monkeypatch):
    """The regular-file check is pread's own refusal: an overlay answers fstat slowly, and it was a
    third of a search's time on the namespace backend."""
    expected = both(tricky_tree, "def ")[1]

    def refused(*_args, **_kwargs):
        raise AssertionError("fstat per file")

    monkeypatch.setattr(os, "fstat", refused)
    files = list(_walk_files(str(tricky_tree)))
    assert _scan(files, re.compile("def "), str(tricky_tree), "def ") == expected


def test_search_tool_same_hits_as_the_reference(tricky_tree):
    """The tool's walk by directory (one item per directory, not per file) lists what the walk by
    file did, in the same order, and finds the same lines."""
    from deepgym_envs.tools import _scan_dirs, _walk_dirs

    for pattern in PATTERNS:
        rx = re.compile(re.escape(pattern))
        got = _scan_dirs(_walk_dirs(str(tricky_tree)), rx, str(tricky_tree), pattern)
        assert got[:2] == reference_scan(list(_walk_files(str(tricky_tree))), rx, str(tricky_tree), pattern)
        assert got[2] is False
    assert list(_walk_files(str(tricky_tree))) == [os.path.join(top, name) for top, names in
                                                   _walk_dirs(str(tricky_tree)) for name in names]
