"""Outbound network for build steps that download: a user-mode stack, never the host's namespace.

A build sandbox's holder has a network namespace of its own, as every sandbox's has. A step that
needs no network gets nothing there (not even loopback to the host). A step that must reach a
package index gets ``slirp4netns`` attached to that namespace: a tap device whose packets a
process on the host turns into ordinary sockets. What the namespace can reach through it:

* not the host's loopback: ``--disable-host-loopback`` (``10.0.2.2``, the gateway, is refused);
* not the host's abstract unix sockets: they belong to the host's network namespace;
* not the host's other addresses, the networks it is on (a docker bridge's ``172.17.0.1``),
  private, shared, link-local (``169.254.169.254``, cloud metadata), documentation, multicast
  and reserved ranges: the namespace routes them nowhere (``prohibit`` routes, set up by its root
  before any step runs; a step, unprivileged in a user namespace below, cannot change them);
* only the public Internet, ``10.0.2.3:53`` (slirp's DNS forwarder to the host's resolver,
  which is what ``/etc/resolv.conf`` names inside), and the addresses of the index hosts the pip
  configuration names (a private mirror on a private network must stay reachable).

No IPv6 is configured inside. Without ``slirp4netns`` (or ``ip``) a step that needs the network
fails with :class:`~deepgym_envs.errors.InfrastructureError`; nothing falls back to the host's
network.
"""

from __future__ import annotations

import ipaddress
import os
import select
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from typing import Iterable, Sequence

from deepgym_envs.errors import InfrastructureError
from deepgym_envs.sandbox.base import launcher_env

#: slirp4netns's DNS forwarder inside the namespace (its default 10.0.2.0/24 network).
GUEST_DNS = "10.0.2.3"
#: IPv4 ranges never routed out: private, shared, loopback, link-local, documentation, benchmark,
#: multicast and reserved. The namespace's own 10.0.2.0/24 is more specific and stays on tap0.
BLOCKED = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
           "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
           "203.0.113.0/24", "224.0.0.0/3")
_START_TIMEOUT = 30.0


def _tool(name: str) -> str | None:
    """The path of ``name``, looked for in the sbin directories too (an ordinary user's PATH may
    lack them, and Debian puts ``ip`` in /sbin as well as /bin)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def require() -> None:
    """Raise :class:`InfrastructureError` when a networked build step cannot be given its own stack."""
    missing = [(tool, pkg) for tool, pkg in (("slirp4netns", "slirp4netns"), ("ip", "iproute2"))
               if _tool(tool) is None]
    if missing:
        raise InfrastructureError(
            f"a build step that downloads packages needs {', '.join(t for t, _ in missing)}: install the Debian "
            f"package {' '.join(p for _, p in missing)} (sudo apt-get install -y {' '.join(p for _, p in missing)}). "
            "Nothing was downloaded: a build step never shares the host's network.")


def host_networks() -> list[str]:
    """The host's own IPv4 addresses and the networks it is directly on, as CIDRs."""
    try:
        out = subprocess.run([_tool("ip") or "ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found: list[str] = []
    for line in out.splitlines():
        words = line.split()
        if "inet" in words and words.index("inet") + 1 < len(words):
            try:
                iface = ipaddress.ip_interface(words[words.index("inet") + 1])
            except ValueError:
                continue
            found += [f"{iface.ip}/32", str(iface.network)]
    return list(dict.fromkeys(found))


def index_addresses(urls: Iterable[str]) -> list[str]:
    """IPv4 addresses of the hosts of the http(s) URLs pip's configuration names (its indexes and
    find-links pages), minus the host's own: these are routed even when private."""
    own = {ipaddress.ip_interface(n).ip for n in host_networks() if n.endswith("/32")}
    found: list[str] = []
    for url in urls:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            continue
        try:
            infos = socket.getaddrinfo(parsed.hostname, parsed.port or 443, socket.AF_INET, socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            continue
        for info in infos:
            ip = ipaddress.ip_address(info[4][0])
            if ip not in own and not ip.is_loopback and not ip.is_unspecified:
                found.append(str(ip))
    return list(dict.fromkeys(found))


class UserNet:
    """slirp4netns attached to the network namespace of process ``pid``, with the routes above.

    ``enter``: the argv prefix that runs a command as root of that namespace's user namespace
    (it sets the routes). ``allow``: addresses routed although a blocked range holds them.
    """

    def __init__(self, pid: int, enter: Sequence[str], allow: Sequence[str] = ()) -> None:
        require()
        ready_r, ready_w = os.pipe()
        # slirp4netns exits when this pipe's write end closes: when we close it, or when we die.
        self._exit_r, self._exit_w = os.pipe()
        self._log = tempfile.TemporaryFile()  # not a pipe: nobody reads it while the step runs
        try:
            self._proc = subprocess.Popen(
                [_tool("slirp4netns") or "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                 "--enable-sandbox", "--enable-seccomp", "--ready-fd", str(ready_w), "--exit-fd", str(self._exit_r),
                 str(pid), "tap0"],
                pass_fds=(ready_w, self._exit_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=self._log, start_new_session=True, env=launcher_env(), cwd="/")
        finally:
            os.close(ready_w)
            os.close(self._exit_r)
        try:
            readable, _, _ = select.select([ready_r], [], [], _START_TIMEOUT)
            if not readable or os.read(ready_r, 1) != b"1":
                raise InfrastructureError(f"slirp4netns did not start: {self._error()}")
            routes = [f"route replace prohibit {net}\n" for net in (*BLOCKED, *host_networks())]
            routes += [f"route replace {ip}/32 via 10.0.2.2 dev tap0\n" for ip in allow]
            proc = subprocess.run([*enter, _tool("ip") or "ip", "-batch", "-"], input="".join(routes),
                                  capture_output=True, text=True, timeout=30, env=launcher_env(), cwd="/")
            if proc.returncode != 0:
                raise InfrastructureError(f"could not fence the build step's network: {proc.stderr.strip()[:300]}")
        except BaseException:
            self.close()
            raise
        finally:
            os.close(ready_r)

    def _error(self) -> str:
        self._proc.kill()
        self._proc.wait()
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-300:] or "it exited"

    def close(self) -> None:
        if self._exit_w < 0:
            return
        os.close(self._exit_w)
        self._exit_w = -1
        if not hasattr(self, "_proc"):
            return
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


def resolv_conf(directory: str) -> str:
    """A resolv.conf naming the stack's DNS forwarder, written in ``directory``; its path."""
    path = os.path.join(directory, "resolv.conf")
    with open(path, "w") as fh:
        fh.write(f"nameserver {GUEST_DNS}\n")
    os.chmod(path, 0o444)
    return path
