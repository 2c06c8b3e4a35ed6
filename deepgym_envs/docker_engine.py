"""The Docker engine as this process reaches it: one shared client, the built-in image's name,
and the labels everything deepgym creates carries (``deepgym sandbox reap`` finds leftovers by them).

The docker SDK is optional and imported only when a client is asked for. Below the sandboxes:
pristine trees taken from images (:mod:`deepgym_envs.image_trees`) reach the engine too.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from deepgym_envs.errors import SandboxUnavailable

#: The image for tasks that bring their own repository (the built-in set); ``deepgym images build``.
DEFAULT_IMAGE = "deepgym/builtin:latest"
#: Labels on everything this backend creates; ``reap`` finds leftovers by them.
LABEL = "deepgym.sandbox"
LABEL_PID = "deepgym.owner-pid"
LABEL_HOST = "deepgym.owner-host"

def default_image() -> str:
    """``$DEEPGYM_DOCKER_IMAGE``, or the image ``deepgym images build`` makes."""
    return os.environ.get("DEEPGYM_DOCKER_IMAGE", DEFAULT_IMAGE)


_CLIENT_LOCK = threading.Lock()
_CLIENT: Any = None


def engine() -> Any:
    """A process-wide Docker client, or :class:`SandboxUnavailable` saying how to get one."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is not None:
            return _CLIENT
        try:
            import docker
        except ImportError:
            raise SandboxUnavailable("The 'docker' sandbox needs the docker SDK: pip install 'deepgym-envs[docker]'. "
                                     "Or choose another backend: sandbox='namespace' (the default).") from None
        try:
            client = docker.from_env(max_pool_size=128, timeout=120)
            client.ping()
        except Exception as exc:  # the SDK raises DockerException, requests' and socket errors alike
            raise SandboxUnavailable(
                f"The 'docker' sandbox cannot reach a Docker engine ({str(exc)[:200]}). Start it "
                "(`sudo systemctl start docker`, or `sudo dockerd >/tmp/dockerd.log 2>&1 &`; set DOCKER_HOST "
                "for a remote engine), or choose another backend: sandbox='namespace' (the default, no "
                "engine needed) or `--sandbox namespace` on the command line.") from None
        _CLIENT = client
        return client


def docker_status(image: str | None = None) -> tuple[bool, str]:
    """Whether sandboxes can start here: an engine answers and the image (default: the built-in one) is there."""
    try:
        require_image(engine(), image or default_image())
    except SandboxUnavailable as exc:
        return False, str(exc)
    return True, ""


def require_image(client: Any, image: str) -> Any:
    """The image's details, or SandboxUnavailable that says how to build it."""
    import docker.errors

    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        hint = ("build it with `deepgym images build` (or `deepgym images build --offline` where no registry "
                "is reachable)") if image == default_image() else f"build it, or `docker pull {image}`"
        raise SandboxUnavailable(f"Docker image {image!r} is not on this engine: {hint}.") from None


def owner_labels() -> dict[str, str]:
    return {LABEL: "1", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()}
