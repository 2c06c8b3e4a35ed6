"""Unpack an untrusted archive (an sdist) strictly, with caps on what it may expand to.

``tarfile``'s ``data`` filter decides from ``os.path.realpath``, which stops resolving links past
``PATH_MAX``: a chain of links then looks like it stays inside while the kernel follows it out
(the symlink-chain escape), and nothing limits how much an archive may expand to. This extractor
takes only what a source distribution needs:

* regular files and directories, created through directory descriptors opened with
  ``O_NOFOLLOW`` and files opened with ``O_EXCL``: nothing is ever written through a link;
* symbolic links only with relative targets that descend (no ``..`` component, not absolute),
  made after every file, so no member is extracted through one and no chain of them leaves;
* no hard links, devices, FIFOs, sparse members, duplicate names or names with ``..``;
* names at most :attr:`~deepgym_envs.untrusted_tree.TreeCaps.depth` components deep and 4096
  characters long, and every directory a name implies counted as a member;
* at most :attr:`UnpackLimits.max_bytes` bytes, :attr:`~UnpackLimits.max_files` members and an
  expansion :attr:`~UnpackLimits.max_ratio` times the archive's size, counted on the bytes really
  decompressed (headers lie), so a bomb stops at the cap.

>>> UnpackLimits().max_files
100000
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from deepgym_envs.errors import DeepgymError
from deepgym_envs.untrusted_tree import TreeCaps, remove_untrusted

_CHUNK = 1 << 20
#: Below this many bytes the ratio is not checked: a tiny archive of repetitive text is no bomb.
_RATIO_FLOOR = 1 << 20
#: PATH_MAX: no name a project needs is longer, and a longer one is only made to exhaust something.
_MAX_NAME = 4096


class UnpackError(DeepgymError):
    """The archive was refused; the message names the member or the cap."""


@dataclass(frozen=True)
class UnpackLimits:
    """Caps on what one archive may unpack to. 0 means off."""

    max_bytes: int = 512 << 20
    """Bytes decompressed in all (file contents and the archive's own headers)."""
    max_files: int = 100_000
    """Members (files, directories and links)."""
    max_ratio: int = 200
    """Bytes decompressed per byte of the archive."""


def unpack(archive: Path | str, dest: Path | str, limits: UnpackLimits = UnpackLimits(), *,
           fileobj: BinaryIO | None = None) -> None:
    """Unpack ``archive`` (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz`` or ``.zip``)
    into ``dest``, which must not exist yet; :class:`UnpackError` when it is refused, and then
    ``dest`` is removed again. ``fileobj``: the archive already opened (by descriptor)."""
    dest = Path(dest)
    name = Path(archive).name
    os.mkdir(dest, 0o755)
    out = _Tree(dest, name, limits)
    try:
        with (open(archive, "rb") if fileobj is None else _borrowed(fileobj)) as fh:
            size = os.fstat(fh.fileno()).st_size
            counter = _Counter(fh, size, limits, name)
            if name.endswith(".zip"):
                _unpack_zip(fh, counter, out)
            else:
                _unpack_tar(counter, out)
        out.finish()
    except BaseException:
        out.close()
        remove_untrusted(dest)
        raise
    out.close()


class _borrowed:
    """A file object the caller owns: rewound, never closed here."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh

    def __enter__(self) -> BinaryIO:
        self.fh.seek(0)
        return self.fh

    def __exit__(self, *exc: object) -> None:
        pass


class _Counter:
    """Counts decompressed bytes against the caps; every read of the archive's contents passes here."""

    def __init__(self, raw: BinaryIO, size: int, limits: UnpackLimits, name: str) -> None:
        self.raw, self.size, self.limits, self.name = raw, max(size, 1), limits, name
        self.total = 0

    def add(self, n: int) -> None:
        self.total += n
        cap = self.limits.max_bytes
        if cap and self.total > cap:
            raise UnpackError(f"{self.name}: unpacks to more than {cap} bytes (the cap on unpacked size)")
        ratio = self.limits.max_ratio
        if ratio and self.total > _RATIO_FLOOR and self.total > ratio * self.size:
            raise UnpackError(f"{self.name}: expands more than {ratio} times its size of {self.size} bytes "
                              "(the cap on the compression ratio)")

    def stream(self) -> "_CountingReader":
        """The decompressed tar stream, counted as it is read."""
        head = self.raw.read(6)
        self.raw.seek(0)
        if head.startswith(b"\x1f\x8b"):
            inner: BinaryIO = gzip.GzipFile(fileobj=self.raw, mode="rb")  # type: ignore[assignment]
        elif head.startswith(b"BZh"):
            inner = bz2.BZ2File(self.raw)  # type: ignore[assignment]
        elif head.startswith(b"\xfd7zXZ\x00"):
            inner = lzma.LZMAFile(self.raw)  # type: ignore[assignment]
        else:
            inner = self.raw
        return _CountingReader(inner, self)


class _CountingReader:
    """A read-only stream for ``tarfile``'s stream mode: refuses a read that would pass a cap
    before making it (a pax header may ask for gigabytes in one read)."""

    def __init__(self, inner: BinaryIO, counter: _Counter) -> None:
        self.inner, self.counter = inner, counter

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = _CHUNK
        cap = self.counter.limits.max_bytes
        if cap and self.counter.total + n > cap + _CHUNK:
            self.counter.add(n)  # raises: the cap names itself
        data = self.inner.read(n)
        self.counter.add(len(data))
        return data


def _unpack_tar(counter: _Counter, out: "_Tree") -> None:
    written = _Counter(counter.raw, counter.size, counter.limits, counter.name)
    try:
        with tarfile.open(fileobj=counter.stream(), mode="r|") as tf:  # type: ignore[call-overload]
            for member in tf:
                out.count()
                path = out.member(member.name)
                if member.isdir():
                    out.directory(path)
                elif member.issparse():
                    # tarfile makes a sparse member's holes without reading the archive: the
                    # counter would see a few bytes of map while gigabytes reach the disk.
                    raise UnpackError(f"{out.archive}: {member.name!r} is a sparse file: only plain files, "
                                      "directories and links within the archive are taken")
                elif member.isreg():
                    src = tf.extractfile(member)
                    assert src is not None
                    # The stream counts what tarfile reads; what reaches the disk is counted on its
                    # own, as a zip member's is, so it is capped whatever tarfile makes of a member.
                    out.file(path, _counted(_chunks(src), written), executable=bool(member.mode & 0o100))
                elif member.issym():
                    out.symlink(path, member.linkname)
                else:
                    kind = "hard link" if member.islnk() else "device, FIFO or other special file"
                    raise UnpackError(f"{out.archive}: {member.name!r} is a {kind}: only files, "
                                      "directories and links within the archive are taken")
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        if isinstance(exc, UnpackError):
            raise
        raise UnpackError(f"{out.archive}: not a readable archive ({exc})") from None


def _unpack_zip(fh: BinaryIO, counter: _Counter, out: "_Tree") -> None:
    try:
        with zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            out.count(len(infos))
            for info in infos:
                path = out.member(info.filename)
                # The high bits hold a Unix mode only when the archive was made on Unix.
                mode = info.external_attr >> 16 if info.create_system == 3 else 0
                if info.is_dir():
                    out.directory(path)
                elif stat.S_IFMT(mode) == stat.S_IFLNK:
                    with zf.open(info) as src:
                        target = src.read(4097)
                    counter.add(len(target))
                    out.symlink(path, target.decode("utf-8", "surrogateescape"))
                elif stat.S_IFMT(mode) in (0, stat.S_IFREG):
                    with zf.open(info) as src:
                        out.file(path, _counted(_chunks(src), counter), executable=bool(mode & 0o100))
                else:
                    raise UnpackError(f"{out.archive}: {info.filename!r} is not a file, directory or link")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as exc:
        if isinstance(exc, UnpackError):
            raise
        raise UnpackError(f"{out.archive}: not a readable archive ({exc})") from None


def _chunks(src: BinaryIO) -> Iterator[bytes]:
    while True:
        chunk = src.read(_CHUNK)
        if not chunk:
            return
        yield chunk


def _counted(chunks: Iterator[bytes], counter: _Counter) -> Iterator[bytes]:
    for chunk in chunks:
        counter.add(len(chunk))
        yield chunk


class _Tree:
    """The destination, written only through descriptors that never follow a link."""

    def __init__(self, dest: Path, archive: str, limits: UnpackLimits) -> None:
        self.archive, self.limits = archive, limits
        self.root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.seen: set[tuple[str, ...]] = set()
        self.links: list[tuple[tuple[str, ...], str]] = []
        self.members = 0
        self.depth = TreeCaps.from_env().depth

    def count(self, n: int = 1) -> None:
        self.members += n
        cap = self.limits.max_files
        if cap and self.members > cap:
            raise UnpackError(f"{self.archive}: more than {cap} members (the cap on files per archive)")

    def member(self, name: str) -> tuple[str, ...]:
        """The member's path as components; refuses what could land anywhere but below ``dest``."""
        parts = tuple(p for p in name.split("/") if p not in ("", "."))
        if not parts or name.startswith("/") or ".." in parts or any("\0" in p for p in parts):
            raise UnpackError(f"{self.archive}: unsafe path {name!r} in the archive")
        # One member names every directory above it: 382 bytes of tar.gz made 100,000 of them.
        if len(name) > _MAX_NAME:
            raise UnpackError(f"{self.archive}: a member's name is {len(name)} characters long "
                              f"(at most {_MAX_NAME} are taken): {name[:200]!r}...")
        if self.depth and len(parts) > self.depth:
            raise UnpackError(f"{self.archive}: {name[:200]!r}... nests {len(parts)} levels deep, over the cap of "
                              f"{self.depth} (DEEPGYM_MAX_TREE_DEPTH)")
        return parts

    def _dir_fd(self, parts: tuple[str, ...], create: bool) -> int:
        """A descriptor of the directory ``parts`` (made when missing), opened without following."""
        fd = os.dup(self.root)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                        self.count()  # a directory no member names is still one on the disk
                    except FileExistsError:
                        pass
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
            return fd
        except OSError as exc:
            os.close(fd)
            raise UnpackError(f"{self.archive}: cannot make {'/'.join(parts)!r} a directory ({exc.strerror})") from None
        except BaseException:
            os.close(fd)
            raise

    def directory(self, parts: tuple[str, ...]) -> None:
        parent = self._dir_fd(parts[:-1], create=True)
        try:
            os.mkdir(parts[-1], 0o755, dir_fd=parent)  # counted as the member it is
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnpackError(f"{self.archive}: cannot make {'/'.join(parts)!r} a directory ({exc.strerror})") from None
        finally:
            os.close(parent)
        os.close(self._dir_fd(parts, create=False))  # refuses what is not a directory (a link, a file)

    def _new(self, parts: tuple[str, ...]) -> None:
        if parts in self.seen:
            raise UnpackError(f"{self.archive}: {'/'.join(parts)!r} appears twice in the archive")
        self.seen.add(parts)

    def file(self, parts: tuple[str, ...], chunks: Iterator[bytes], *, executable: bool) -> None:
        self._new(parts)
        parent = self._dir_fd(parts[:-1], create=True)
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o755 if executable else 0o644, dir_fd=parent)
        except OSError as exc:
            raise UnpackError(f"{self.archive}: cannot write {'/'.join(parts)!r} ({exc.strerror})") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)

    def symlink(self, parts: tuple[str, ...], target: str) -> None:
        self._new(parts)
        steps = target.split("/")
        if not target or target.startswith("/") or ".." in steps or "\0" in target:
            raise UnpackError(f"{self.archive}: link {'/'.join(parts)!r} -> {target!r} does not point down "
                              "into the archive (only relative links without '..' are taken)")
        self.links.append((parts, target))

    def finish(self) -> None:
        """Make the links, now that every file is written: no member went through one."""
        for parts, target in self.links:
            parent = self._dir_fd(parts[:-1], create=True)
            try:
                os.symlink(target, parts[-1], dir_fd=parent)
            except OSError as exc:
                raise UnpackError(f"{self.archive}: cannot make link {'/'.join(parts)!r} ({exc.strerror})") from None
            finally:
                os.close(parent)

    def close(self) -> None:
        if self.root >= 0:
            os.close(self.root)
            self.root = -1
