"""Fetch a project to synthesise tasks from, and record exactly what was fetched.

``pypi:NAME==VERSION`` downloads the source distribution with pip (``--no-binary :all:`` so it is
the sdist, which is where projects ship their tests) and unpacks it; ``git:PATH_OR_URL[@REV]``
clones a repository (a local path or any URL git can reach) at a revision.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from deepgym_envs.errors import DeepgymError
from deepgym_envs.trees import run_git


class SynthError(DeepgymError):
    """Synthesis cannot go on for this source; the message is the reason shown in the summary."""


@dataclass(frozen=True)
class SourceSpec:
    """What the user asked for: ``pypi:NAME==VERSION`` or ``git:PATH_OR_URL[@REV]``."""

    kind: str  # "pypi" | "git"
    name: str
    version: str = ""
    location: str = ""
    """The git path or URL."""

    @classmethod
    def parse(cls, text: str) -> "SourceSpec":
        kind, sep, rest = text.partition(":")
        if not sep or kind not in ("pypi", "git") or not rest:
            raise DeepgymError(f"--from {text!r}: expected pypi:NAME==VERSION or git:PATH_OR_URL[@REV]")
        if kind == "pypi":
            name, _, version = rest.partition("==")
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise DeepgymError(f"--from {text!r}: {name!r} is not a package name")
            return cls("pypi", name, version.strip())
        location, rev = rest, ""
        if "@" in rest and not rest.rsplit("@", 1)[1].count("/") and not rest.startswith("git@"):
            location, rev = rest.rsplit("@", 1)
        name = Path(location.rstrip("/")).name.removesuffix(".git") or "repo"
        return cls("git", name, rev, location)

    def __str__(self) -> str:
        if self.kind == "pypi":
            return f"pypi:{self.name}" + (f"=={self.version}" if self.version else "")
        return f"git:{self.location}" + (f"@{self.version}" if self.version else "")


@dataclass(frozen=True)
class Fetched:
    """The project on disk, and its provenance."""

    spec: SourceSpec
    root: Path
    """The unpacked source tree (or the clone's work tree)."""
    name: str
    version: str
    sha256: str
    """Of the sdist archive, or the git commit id."""
    origin: str
    """The archive's file name, or the repository location."""

    @property
    def repo(self) -> str:
        """The task rows' ``repo`` field: where the code came from, per project."""
        return f"{self.spec.kind}/{self.name}"

    def provenance(self) -> dict[str, str]:
        return {"source": str(self.spec), "name": self.name, "version": self.version,
                "sha256" if self.spec.kind == "pypi" else "commit": self.sha256, "origin": self.origin}


def fetch(spec: SourceSpec, workdir: Path, *, timeout: float = 300) -> Fetched:
    """Download or clone the project into ``workdir``; SynthError with the reason when it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    return _fetch_pypi(spec, workdir, timeout) if spec.kind == "pypi" else _fetch_git(spec, workdir)


def _fetch_pypi(spec: SourceSpec, workdir: Path, timeout: float) -> Fetched:
    download = workdir / "download"
    requirement = f"{spec.name}=={spec.version}" if spec.version else spec.name
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--disable-pip-version-check", "-q", "-d", str(download), requirement],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SynthError(f"pip download of {requirement} took longer than {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise SynthError(f"no source distribution of {requirement}: {_last_line(proc.stderr)}")
    archives = sorted(download.iterdir())
    if len(archives) != 1:
        raise SynthError(f"expected one sdist of {requirement}, got {[a.name for a in archives]}")
    archive = archives[0]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    root = _unpack(archive, workdir / "src")
    version = spec.version or _version_from_archive(archive.name, spec.name)
    return Fetched(spec, root, spec.name, version, digest, archive.name)


def _unpack(archive: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if member.startswith("/") or ".." in member.split("/"):
                    raise SynthError(f"{archive.name}: unsafe path {member!r} in the archive")
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")  # refuses absolute paths, links out of dest, devices
            else:  # Python before 3.10.12 / 3.11.4: the same refusals, by hand
                for member in tf.getmembers():
                    _check_member(member, archive.name)
                tf.extractall(dest)
    entries = [p for p in dest.iterdir()]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


def _check_member(member: tarfile.TarInfo, archive: str) -> None:
    if member.name.startswith("/") or ".." in member.name.split("/"):
        raise SynthError(f"{archive}: unsafe path {member.name!r} in the archive")
    if not (member.isfile() or member.isdir() or member.issym()):
        raise SynthError(f"{archive}: {member.name!r} is not a file, directory or symbolic link")
    # No member name has "..", so a link whose target stays inside lexically cannot be chained out.
    target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
    if member.issym() and (member.linkname.startswith("/") or target == ".." or target.startswith("../")):
        raise SynthError(f"{archive}: link {member.name!r} points outside the archive")


def _version_from_archive(filename: str, name: str) -> str:
    stem = re.sub(r"\.(tar\.gz|tar\.bz2|tgz|zip)$", "", filename)
    return stem.rsplit("-", 1)[1] if "-" in stem else "0"


def _fetch_git(spec: SourceSpec, workdir: Path) -> Fetched:
    location = spec.location
    if Path(location).expanduser().exists():
        location = str(Path(location).expanduser().resolve())
    dest = workdir / "src"
    try:
        run_git(["clone", "-q", location, str(dest)])
        if spec.version:
            run_git(["checkout", "-q", "--detach", spec.version], cwd=dest)
        commit = run_git(["rev-parse", "HEAD"], cwd=dest).strip()
    except DeepgymError as exc:
        raise SynthError(f"cannot clone {spec.location}: {_last_line(str(exc))}") from None
    version = spec.version or commit[:12]
    return Fetched(spec, dest, spec.name, version, commit, spec.location)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
