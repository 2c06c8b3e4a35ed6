"""A headless Chromium driven over the DevTools protocol, for tests that need a real browser.

Chromium's ``--remote-debugging-pipe`` reads protocol commands on fd 3 and writes replies on fd 4,
NUL-terminated JSON. Speaking it over two pipes needs no websocket library and no free TCP port,
and the browser dies with the pipe, so a failed test leaves nothing running.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--remote-debugging-pipe"]


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless browser with one page. Use as a context manager."""

    def __init__(self, timeout: float = 30.0, width: int = 1280, height: int = 900) -> None:
        if CHROMIUM is None:
            raise BrowserError("no chromium on PATH")
        self.timeout, self.width, self.height = timeout, width, height
        self._profile = tempfile.TemporaryDirectory(prefix="deepgym-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: put the pipe ends where chromium looks for them
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
                                      pass_fds=(3, 4), preexec_fn=wire, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf, self._next_id, self._session, self._closed = b"", 0, "", False
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                      session=False)["sessionId"]
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        """Send one command and wait for its reply (events in between are dropped)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                    raise BrowserError(f"no reply to {method} within {self.timeout} s")
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise BrowserError(f"chromium exited (status {self._proc.poll()}) during {method}")
                self._buf += chunk
            line, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> None:
        """Navigate and wait until the page and its scripts have run."""
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not finish loading")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the element, as a user makes it."""
        box = self.evaluate(f"(function(){{var e=document.querySelector({json.dumps(selector)});"
                            "if(!e)return null;e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
                            "return [r.x+r.width/2,r.y+r.height/2];})()")
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def screenshot(self, path: Path) -> None:
        """The whole page (not just the viewport) as a PNG."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": max(height, 200), "deviceScaleFactor": 1, "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    def close(self) -> None:
        if self._closed:  # the fds may already belong to someone else: never close them twice
            return
        self._closed = True
        if self._proc.poll() is None:
            try:
                os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()


def dump_dom(url: str, timeout: float = 60.0) -> str:
    """The DOM after scripts ran, from ``chromium --dump-dom`` (no protocol involved)."""
    if CHROMIUM is None:
        raise BrowserError("no chromium on PATH")
    with tempfile.TemporaryDirectory(prefix="deepgym-chromium-") as profile:
        argv = [CHROMIUM, *[f for f in FLAGS if f != "--remote-debugging-pipe"], f"--user-data-dir={profile}",
                "--dump-dom", url]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise BrowserError(f"chromium --dump-dom exited {done.returncode}: {done.stderr[-500:]}")
    return done.stdout
