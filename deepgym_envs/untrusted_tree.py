"""Trees made by someone else, copied onto the host: from a local directory or an image's archive.

Task repositories and container images come from strangers (a hub's task folder, a row's
``image``). What lands in the pristine tree is only

* regular files (written anew by us: mode 0644, or 0755 where any execute bit was set),
* directories,
* relative symbolic links that stay inside the tree, resolved as the tree's own root would
  resolve them (a chain of in-tree links that climbs out is removed afterwards).

Device nodes, FIFOs, sockets, absolute or escaping links are dropped; an archive's hard link
becomes a copy of a file already extracted, or nothing. Every write refuses to follow a link, and
links are created only after every file and directory is in place, so nothing is written through
one. Sizes are capped (:class:`TreeCaps`): a stranger's tree cannot fill the disk.

>>> caps = TreeCaps.from_env()            # DEEPGYM_MAX_TREE_BYTES=2G, DEEPGYM_MAX_TREE_FILES=200000, ...
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator

from deepgym_envs.errors import TaskFormatError

log = logging.getLogger(__name__)

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"1048576"``: bytes (binary units)."""
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = raw[-1:] if raw[-1:] in _UNITS and raw[-1:] else ""
    number = raw[: len(raw) - len(unit)]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a size (bytes, or a number with K, M, G or T)") from None
    if value < 0:
        raise ValueError(f"{text!r}: a size cannot be negative")
    return int(value * _UNITS[unit])


@dataclass(frozen=True)
class TreeCaps:
    """Limits on what a tree from outside may make on the host. 0 means off."""

    bytes: int = 2 << 30
    """Regular files' apparent size in all (a sparse file counts by its length)."""
    files: int = 200_000
    """Entries of every kind (files, directories, links)."""
    export_bytes: int = 8 << 30
    """The raw archive read from an image, ``.git`` and dropped entries included."""
    cache_bytes: int = 4 << 30
    """A task's whole cache entry: the tree and the git directory built for it."""
    depth: int = 256
    """Directories nested in one another (far more than any project, far less than PATH_MAX)."""

    ENV = {"bytes": "DEEPGYM_MAX_TREE_BYTES", "files": "DEEPGYM_MAX_TREE_FILES",
           "export_bytes": "DEEPGYM_MAX_EXPORT_BYTES", "cache_bytes": "DEEPGYM_MAX_CACHE_BYTES",
           "depth": "DEEPGYM_MAX_TREE_DEPTH"}

    @classmethod
    def from_env(cls) -> TreeCaps:
        """The defaults, each overridden by its environment variable (``ENV``)."""
        values = {}
        for name, var in cls.ENV.items():
            raw = os.environ.get(var, "").strip()
            if raw:
                try:
                    values[name] = int(raw) if name in ("files", "depth") else parse_size(raw)
                except ValueError as exc:
                    raise ValueError(f"{var}: {exc}") from None
        return cls(**values)


@dataclass(frozen=True)
class Origin:
    """Whose tree this is, for error messages: the task's row (``file:line``), field and id."""

    source: str
    field: str
    instance_id: str


class TreeTooLarge(TaskFormatError):
    """A tree, archive or cache entry over one of the :class:`TreeCaps`."""

    def __init__(self, origin: Origin, cap: str, limit: int, detail: str) -> None:
        var = TreeCaps.ENV[cap]
        unit = {"files": "entries", "depth": "levels"}.get(cap, "bytes")
        super().__init__(origin.source, None, origin.field,
                         f"task {origin.instance_id}: {detail}, over the cap of {limit} {unit} ({var}; "
                         f"set it higher, or to 0 for no cap, if you trust this task)")
        self.cap = cap


@dataclass
class _Budget:
    caps: TreeCaps
    origin: Origin
    bytes: int = 0
    files: int = 0

    def add(self, rel: str, size: int = 0) -> None:
        if self.caps.depth and rel.count("/") >= self.caps.depth:
            raise TreeTooLarge(self.origin, "depth", self.caps.depth,
                               f"the tree nests directories more than {self.caps.depth} deep ({rel[:200]}...)")
        self.files += 1
        self.bytes += size
        if self.caps.files and self.files > self.caps.files:
            raise TreeTooLarge(self.origin, "files", self.caps.files, f"the tree has more than {self.caps.files} entries")
        if self.caps.bytes and self.bytes > self.caps.bytes:
            raise TreeTooLarge(self.origin, "bytes", self.caps.bytes,
                               f"the tree's files reach {self.bytes} bytes at {rel!r} ({size} bytes)")


@dataclass
class CopyReport:
    """What a copy left out (path and why), for a warning."""

    dropped: list[tuple[str, str]] = field(default_factory=list)

    def drop(self, rel: str, why: str) -> None:
        self.dropped.append((rel, why))

    def warn(self, origin: Origin) -> None:
        if self.dropped:
            shown = ", ".join(f"{rel} ({why})" for rel, why in self.dropped[:5])
            more = f" and {len(self.dropped) - 5} more" if len(self.dropped) > 5 else ""
            log.warning("task %s: left out of the pristine tree: %s%s", origin.instance_id, shown, more)


def _inside(real: str, root: str) -> bool:
    """``real`` (a resolved path) is ``root`` or under it, and not in a git directory there."""
    if real == root:
        return True
    if not real.startswith(root + os.sep):
        return False
    return ".git" not in real[len(root) + 1:].split(os.sep)


def in_tree_target(rel: str, target: str) -> bool:
    """Whether a link at ``rel`` pointing at ``target`` stays in the tree, read lexically.

    Absolute targets and targets into ``.git`` (the git directory is the project's own) are out.
    """
    if not target or os.path.isabs(target) or "\0" in target:
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    parts = joined.split(os.sep)
    return parts[0] not in ("..", ".git") and joined != ".."


def _write_new(dest: Path, rel: str, data: IO[bytes], size: int, executable: bool) -> None:
    """Create ``dest/rel`` from ``data`` (at most ``size`` bytes): never through a link, never a non-file."""
    path = dest / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o755 if executable else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{rel}: not a regular file")
        os.fchmod(fd, mode)
        left = size
        while left > 0:
            chunk = data.read(min(left, 1 << 20))
            if not chunk:
                break
            _write_all(fd, chunk)
            left -= len(chunk)
    finally:
        os.close(fd)


def _write_all(fd: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view):]


class _Links:
    """Links to create once every file and directory exists, and the pruning of escaping chains."""

    def __init__(self, dest: Path, report: CopyReport) -> None:
        self.dest, self.report = dest, report
        self.pending: list[tuple[str, str]] = []

    def add(self, rel: str, target: str) -> None:
        if in_tree_target(rel, target):
            self.pending.append((rel, target))
        else:
            self.report.drop(rel, f"link to {target!r} outside the tree")

    def create(self) -> None:
        root = os.path.realpath(self.dest)
        made: list[str] = []
        for rel, target in self.pending:
            path = os.path.join(root, rel)
            parent = os.path.dirname(path)
            # A parent that is itself a link (made earlier in this loop) would carry this one elsewhere.
            if os.path.realpath(parent) != os.path.normpath(parent) or not os.path.isdir(parent):
                self.report.drop(rel, "link under a link")
                continue
            try:
                os.symlink(target, path)
            except OSError as exc:
                self.report.drop(rel, f"link not made: {exc.strerror}")
                continue
            made.append(path)
        _prune(root, made, self.report)


def _prune(root: str, links: list[str], report: CopyReport) -> None:
    """Remove the links that, followed, leave ``root`` or enter a ``.git`` (the project's own, made
    later: a path that does not exist yet resolves lexically, so ``dot/.git`` through ``dot -> .``
    is seen for what it will be). Each link read alone stays inside; a chain (``a/b -> ..``,
    ``c -> a/b/..``) may not: repeat until none escapes (removing only ever makes a link dangle)."""
    changed = True
    while changed:
        changed = False
        for path in list(links):
            if not _inside(os.path.realpath(path), root):
                os.unlink(path)
                links.remove(path)
                report.drop(os.path.relpath(path, root), "link leading outside the tree or into .git")
                changed = True


def prune_links(tree: Path) -> CopyReport:
    """Apply the link rules to a tree that something else wrote (a patch applied to it): every link
    that is absolute, climbs out, or leads into ``.git`` is removed."""
    report = CopyReport()
    root = os.path.realpath(tree)
    links = []
    for path, rel in _links(root):
        if in_tree_target(rel, os.readlink(path)):
            links.append(path)
        else:
            os.unlink(path)
            report.drop(rel, "link outside the tree")
    _prune(root, links, report)
    return report


def escaping_links(tree: Path) -> list[str]:
    """The links of a tree (its ``.git`` aside) that :func:`prune_links` would remove."""
    root = os.path.realpath(tree)
    return [rel for path, rel in _links(root)
            if not (in_tree_target(rel, os.readlink(path)) and _inside(os.path.realpath(path), root))]


def _links(root: str) -> Iterator[tuple[str, str]]:
    """Every link under ``root`` (its top-level ``.git`` aside): host path and path in the tree."""
    for directory, dirs, files in os.walk(root):
        if directory == root:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                yield path, os.path.relpath(path, root)


def copy_dir(src: Path, dest: Path, caps: TreeCaps, origin: Origin,
             skip: Callable[[str], bool] = lambda rel: False) -> CopyReport:
    """Copy the directory ``src`` into the new directory ``dest`` under the rules above."""
    report, budget = CopyReport(), _Budget(caps, origin)
    links = _Links(dest, report)
    dest.mkdir(parents=True)

    pending = [(str(src), "")]  # a stack, not recursion: depth is a cap, never a RecursionError
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            if skip(rel):
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                budget.add(rel)
                (dest / rel).mkdir(mode=0o755)
                pending.append((entry.path, rel + "/"))
            elif stat.S_ISLNK(st.st_mode):
                budget.add(rel)
                links.add(rel, os.readlink(entry.path))
            elif stat.S_ISREG(st.st_mode):
                budget.add(rel, st.st_size)
                _copy_file(entry.path, dest, rel, st, report)
            else:
                report.drop(rel, "not a file, directory or link")
    links.create()
    return report


def _copy_file(path: str, dest: Path, rel: str, st: os.stat_result, report: CopyReport) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        report.drop(rel, f"unreadable: {exc.strerror}")
        return
    with os.fdopen(fd, "rb") as fh:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # swapped since the listing
            report.drop(rel, "not a regular file when opened")
            return
        _write_new(dest, rel, fh, st.st_size, bool(st.st_mode & 0o111))


class CountingReader:
    """A binary file object over an iterator of byte chunks (the Docker SDK's archive stream),
    refusing to read more than ``limit`` bytes (0: no limit)."""

    def __init__(self, chunks, limit: int, origin: Origin) -> None:
        self._chunks, self._limit, self._origin = iter(chunks), limit, origin
        self._buf = b""
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while n < 0 or len(out) < n:
            if not self._buf:
                self._buf = next(self._chunks, b"")
                if not self._buf:
                    break
                self.read_bytes += len(self._buf)
                if self._limit and self.read_bytes > self._limit:
                    raise TreeTooLarge(self._origin, "export_bytes", self._limit,
                                       f"the image's archive is larger than {self._limit} bytes")
            take = len(self._buf) if n < 0 else min(n - len(out), len(self._buf))
            out += self._buf[:take]
            self._buf = self._buf[take:]
        return bytes(out)


def extract_tar(fileobj: IO[bytes], dest: Path, caps: TreeCaps, origin: Origin, *,
                skip: Callable[[str], bool] = lambda rel: False,
                keep: Callable[[str], bool] = lambda rel: False) -> tuple[CopyReport, dict[str, bytes]]:
    """Extract a tar stream whose entries sit under one top directory (``testbed/...``) into ``dest``.

    ``skip``: paths (relative to the top directory) never extracted. ``keep``: small regular files
    whose bytes are returned instead, read but never written (``.git/HEAD``, refs: up to 256 bytes
    each, a ref's size; ``packed-refs`` up to 1 MiB), counted against the caps like any file.
    """
    report, budget = CopyReport(), _Budget(caps, origin)
    links = _Links(dest, report)
    kept: dict[str, bytes] = {}
    written: set[str] = set()
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        for member in tar:
            rel = _member_path(member.name)
            if rel is None:
                report.drop(member.name, "path outside the top directory")
                continue
            if not rel:
                continue
            if keep(rel) and member.isreg() and member.size <= (1 << 20 if rel.endswith("packed-refs") else 256):
                budget.add(rel, member.size)
                kept[rel] = tar.extractfile(member).read()  # type: ignore[union-attr]
            if skip(rel):
                continue
            try:
                _extract_member(tar, member, rel, dest, budget, links, written, report)
            except (OSError, tarfile.TarError) as exc:
                report.drop(rel, f"not extracted: {exc}")
    links.create()
    return report, kept


def _member_path(name: str) -> str | None:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if name.startswith("/") or not parts or ".." in parts:
        return None
    return "/".join(parts[1:])


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str, dest: Path, budget: _Budget,
                    links: _Links, written: set[str], report: CopyReport) -> None:
    if member.isdir():
        budget.add(rel)
        path = dest / rel
        if not path.is_dir():
            path.mkdir(mode=0o755, parents=True)
    elif member.isreg():
        budget.add(rel, member.size)
        _write_new(dest, rel, tar.extractfile(member), member.size, bool(member.mode & 0o111))  # type: ignore[arg-type]
        written.add(rel)
    elif member.issym():
        budget.add(rel)
        links.add(rel, member.linkname)
    elif member.islnk():
        # A hard link: a copy of a file this archive already gave, never a path on the host.
        target = _member_path(member.linkname)
        if target not in written:
            report.drop(rel, "hard link to nothing extracted")
            return
        st = os.lstat(dest / target)
        budget.add(rel, st.st_size)
        with open(dest / target, "rb") as fh:
            _write_new(dest, rel, fh, st.st_size, bool(st.st_mode & 0o111))
        written.add(rel)
    else:
        report.drop(rel, "not a file, directory or link")


def tree_bytes(root: Path) -> int:
    """Apparent size of every regular file under ``root`` (links not followed)."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(directory, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def check_cache_entry(root: Path, caps: TreeCaps, origin: Origin) -> None:
    """Refuse a built cache entry (tree and git directory) over ``caps.cache_bytes``."""
    if caps.cache_bytes:
        size = tree_bytes(root)
        if size > caps.cache_bytes:
            raise TreeTooLarge(origin, "cache_bytes", caps.cache_bytes, f"its cache entry would take {size} bytes")


def remove_untrusted(path: Path | str) -> None:
    """Remove ``path``, a folder code we do not trust wrote into (a build's scratch folder).

    ``TemporaryDirectory``'s cleanup on Python < 3.11.8 (CVE-2023-6597) and ``shutil.rmtree``'s
    usual error handlers chmod a path when an unlink is refused, following a link the build planted
    there to any file of the user's. Here every step is relative to a directory descriptor opened
    with ``O_NOFOLLOW``; only directories are made writable (through an ``O_PATH`` descriptor of
    the directory itself); a link is unlinked, never followed. The walk keeps no Python recursion
    and a bounded number of descriptors: a directory deeper than a few levels is first moved up
    to the top (a build can nest directories far past the interpreter's recursion limit).
    """
    path = os.path.abspath(path)
    parent = os.open(os.path.dirname(path) or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        name = os.path.basename(path)
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent)
            return
        _remove_dir(parent, name)
    finally:
        os.close(parent)


_REMOVE_DEPTH = 32


def _open_writable_dir(parent: int, name: str) -> int:
    """``name`` in ``parent``, a directory (never a link), made searchable and writable by its owner."""
    flags = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    handle = os.open(name, os.O_PATH | flags, dir_fd=parent)
    try:
        st = os.fstat(handle)
        if st.st_mode & 0o700 != 0o700 and st.st_uid == os.geteuid():
            # The descriptor's /proc link names the directory it was opened on, never a link.
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(st.st_mode) | 0o700)
    finally:
        os.close(handle)
    return os.open(name, os.O_RDONLY | flags, dir_fd=parent)


def _remove_dir(parent: int, name: str) -> None:
    top = _open_writable_dir(parent, name)
    stack: list[tuple[int, str, list[str]]] = [(top, name, os.listdir(top))]
    moved = 0
    try:
        while stack:
            fd, here, names = stack[-1]
            if not names:
                stack.pop()
                os.close(fd)
                os.rmdir(here, dir_fd=stack[-1][0] if stack else parent)
                continue
            entry = names.pop()
            try:
                st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(entry, dir_fd=fd)
                continue
            child = _open_writable_dir(fd, entry)
            if len(stack) < _REMOVE_DEPTH:
                stack.append((child, entry, os.listdir(child)))
                continue
            os.close(child)
            while True:  # a name at the top that is not taken yet
                moved += 1
                try:
                    os.rename(entry, f".deepgym-rm-{moved}", src_dir_fd=fd, dst_dir_fd=top)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                        raise
            stack[0][2].append(f".deepgym-rm-{moved}")
    finally:
        for fd, _, _ in stack:
            os.close(fd)
