"""``deepgym images build``: the container image the docker backend runs the built-in tasks in.

Online, the image is built from ``deepgym_envs/sandbox/Dockerfile`` on the official
``python:3.11-slim``. Where no registry is reachable (``--offline``), the base is made here
instead: ``debootstrap`` writes a minimal Debian with python3, pytest and git into a directory,
which is imported as an image (``tar | docker import``), and the same Dockerfile is built on it.

>>> build_image(offline=True)      # doctest: +SKIP
'deepgym/builtin:latest'
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from deepgym_envs.docker_engine import default_image, engine
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.progress import console
from deepgym_envs.sandbox.docker_support import SANDBOX_UID

#: The imported debootstrap root filesystem (the offline base).
OFFLINE_BASE = "deepgym/debian-bookworm:latest"
ONLINE_BASE = "python:3.11-slim"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
_DEBOOTSTRAP_PACKAGES = "python3,python3-pytest,git"


@dataclass(frozen=True)
class ImageBuild:
    """What ``deepgym images build`` should make."""

    tag: str = ""
    """The image to build (default: the docker backend's default image)."""
    offline: bool = False
    """Build the base from a Debian root filesystem instead of pulling ``python:3.11-slim``."""
    rebuild_base: bool = False
    """Offline: run debootstrap again even if the base image is already on the engine."""
    mirror: str = DEBIAN_MIRROR
    """Offline: the Debian mirror debootstrap downloads packages from."""
    suite: str = "bookworm"


def dockerfile() -> Path:
    return Path(__file__).parent / "sandbox" / "Dockerfile"


def build_image(spec: ImageBuild = ImageBuild(), log=print) -> str:
    """Build the image; returns its tag. Idempotent: an unchanged build is answered from the cache."""
    client = engine()
    tag = spec.tag or default_image()
    base = ONLINE_BASE
    if spec.offline:
        base = OFFLINE_BASE
        if spec.rebuild_base or not _has_image(client, base):
            make_offline_base(base, spec.mirror, spec.suite, log)
        else:
            log(f"offline base {base} is already on the engine (--rebuild-base to make it again)")
    log(f"building {tag} from {base}")
    with tempfile.TemporaryDirectory(prefix="deepgym-image-") as ctx:
        shutil.copyfile(dockerfile(), os.path.join(ctx, "Dockerfile"))
        for event in client.api.build(path=ctx, tag=tag, buildargs={"BASE": base, "SANDBOX_UID": str(SANDBOX_UID)}, rm=True, forcerm=True,
                                      pull=False, decode=True, labels={"deepgym.image": "builtin"}):
            if "error" in event:
                hint = (" (no registry reachable? try `deepgym images build --offline`)"
                        if not spec.offline else "")
                raise InfrastructureError(f"docker build of {tag} failed: {event['error'].strip()}{hint}")
            line = str(event.get("stream", "")).strip()
            if line.startswith("Step "):
                log(line)
    return tag


def make_offline_base(name: str, mirror: str = DEBIAN_MIRROR, suite: str = "bookworm", log=print) -> None:
    """debootstrap a minimal Debian (python3, pytest, git) and import it into the engine as ``name``."""
    if shutil.which("debootstrap") is None:
        raise DeepgymError("--offline needs debootstrap (Debian/Ubuntu: apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise DeepgymError("--offline runs debootstrap, which needs root: run it with sudo")
    client = engine()
    with tempfile.TemporaryDirectory(prefix="deepgym-rootfs-") as tmp:
        root = os.path.join(tmp, "root")
        started = time.monotonic()
        log(f"debootstrap {suite} from {mirror} (about a minute)")
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={_DEBOOTSTRAP_PACKAGES}", suite,
                               root, mirror], capture_output=True, text=True)
        if proc.returncode != 0:
            raise InfrastructureError(f"debootstrap failed: {(proc.stderr or proc.stdout).strip()[-2000:]}")
        log(f"debootstrap done in {time.monotonic() - started:.0f}s; importing as {name}")
        repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
        tar = subprocess.Popen(["tar", "-C", root, "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            client.api.import_image(src=tar.stdout, repository=repository, tag=tag, stream_src=True,
                                    changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                             'CMD ["sleep", "infinity"]'])
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            if tar.wait() != 0:
                raise InfrastructureError("tar of the debootstrap root filesystem failed")


def _has_image(client, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def _run_build(args: argparse.Namespace) -> int:
    spec = ImageBuild(tag=args.tag or "", offline=args.offline, rebuild_base=args.rebuild_base, mirror=args.mirror)
    started = time.monotonic()
    tag = build_image(spec, log=lambda line: console().print(line, markup=False, highlight=False))
    console().print(f"[green]built[/] {tag} in {time.monotonic() - started:.0f}s")
    return 0


def add_images_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``images`` on the ``deepgym`` command's subparsers."""
    images = subparsers.add_parser("images", help="build the container image of the docker backend")
    sub = images.add_subparsers(dest="images_cmd", required=True)
    p = sub.add_parser("build", help="build the image the built-in tasks run in (deepgym/builtin:latest)")
    p.add_argument("--offline", action="store_true", help="no registry: make the base with debootstrap "
                   "(root, Debian mirror reachable) instead of pulling python:3.11-slim")
    p.add_argument("--tag", default=None, help="image name (default: $DEEPGYM_DOCKER_IMAGE or deepgym/builtin:latest)")
    p.add_argument("--rebuild-base", action="store_true", help="offline: debootstrap again even if the base exists")
    p.add_argument("--mirror", default=DEBIAN_MIRROR, help="offline: Debian mirror for debootstrap")
    p.set_defaults(func=_run_build)
    return images
