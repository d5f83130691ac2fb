"""Headless Chromium driven over the Chrome DevTools Protocol (CDP) on a pipe, for the report's
browser test and the documentation's screenshot.

``chromium --remote-debugging-pipe`` reads CDP commands from file descriptor 3 and writes
responses and events to descriptor 4, each message one JSON text ended by a NUL byte. No port
is opened and no extra package is needed. :class:`Chromium` starts the browser with a private
profile, opens one page (a flat session), records every console message, uncaught exception,
log entry and network request of that page, and stops the browser on exit.

    with Chromium.start() as browser:
        page = browser.open("file:///tmp/report.html", width=1280, height=900)
        page.evaluate("document.title")
        png = page.screenshot()
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: executables tried in order
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable on PATH, else ``None``."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    """A CDP command failed, timed out, or the browser went away."""


@dataclass
class PageLog:
    """What a page did: ``console`` (type, text) of every console message, ``exceptions``
    (uncaught), ``log`` (level, text, url) of the browser's log entries, ``requests`` (every URL
    the page requested, its own document included)."""

    console: list[tuple[str, str]] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def errors(self) -> list[str]:
        """Console errors/assertions, uncaught exceptions and error log entries, one line each."""
        return ([f"console.{t}: {text}" for t, text in self.console if t in ("error", "assert")]
                + [f"exception: {e}" for e in self.exceptions]
                + [f"log {level}: {text} ({url})" for level, text, url in self.log if level == "error"])


class Chromium:
    """One headless browser process and its CDP pipe (use :meth:`start` as a context manager)."""

    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int, profile: str) -> None:
        self.proc = proc
        self._out = to_browser
        self._in = from_browser
        self._profile = profile
        self._next_id = 0
        self._lock = threading.Lock()
        self._pending: dict[int, queue.Queue] = {}
        self._events: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, executable: str | None = None) -> Chromium:
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError(f"no Chromium found (looked for {', '.join(BROWSERS)})")
        profile = tempfile.mkdtemp(prefix="sysid-chromium-")
        cmd_r, cmd_w = os.pipe()  # we write commands, the browser reads them on fd 3
        res_r, res_w = os.pipe()  # the browser writes on fd 4, we read
        # copies at fds >= 10, so moving them onto 3 and 4 in the child cannot clobber each other
        child_in, child_out = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)

        def wire() -> None:  # in the child, before exec: fds 3 and 4 (inheritable, unlike the others)
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = [exe, "--headless", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
                "--password-store=basic", "--use-mock-keychain", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=wire)
        finally:
            for fd in (cmd_r, res_w, child_in, child_out):
                os.close(fd)
        return cls(proc, cmd_w, res_r, profile)

    # ------------------------------------------------------------------------------ transport
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        waiter = self._pending.pop(msg["id"], None)
                    if waiter is not None:
                        waiter.put(msg)
                else:
                    self._events.put(msg)
        with self._lock:  # the browser went away: wake every waiter
            for waiter in self._pending.values():
                waiter.put({"error": {"message": "the browser closed the pipe"}})
            self._pending.clear()

    def send(self, method: str, params: dict | None = None, *, session: str | None = None,
             timeout: float = 300.0) -> dict[str, Any]:
        """Send one command and wait (at most ``timeout`` s) for its result."""
        waiter: queue.Queue = queue.Queue()
        with self._lock:
            self._next_id += 1
            mid = self._next_id
            self._pending[mid] = waiter
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]
        try:
            reply = waiter.get(timeout=timeout)
        except queue.Empty:
            raise CDPError(f"{method}: no answer within {timeout:g} s") from None
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def events(self, timeout: float) -> Any:
        """Events as they arrive, until ``timeout`` s have passed without the caller stopping."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                yield self._events.get(timeout=left)
            except queue.Empty:
                return

    # ------------------------------------------------------------------------------- pages
    def open(self, url: str, *, width: int = 1280, height: int = 900, timeout: float = 120.0) -> Page:
        """Open ``url`` in a new page of ``width`` × ``height`` CSS pixels with every page event
        recorded from before the navigation; returns when its load event fired."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        page.wait_for("Page.loadEventFired", timeout=timeout)
        return page

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=10)
                except CDPError:
                    pass
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=20)
        finally:
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """One page (a flat CDP session) and its :class:`PageLog`."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser = browser
        self.session = session
        self.log = PageLog()

    def _record(self, msg: dict[str, Any]) -> None:
        if msg.get("sessionId") != self.session:
            return
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.log.console.append((p.get("type", ""), text))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.log.exceptions.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            self.log.log.append((e.get("level", ""), e.get("text", ""), e.get("url", "")))
        elif method == "Network.requestWillBeSent":
            self.log.requests.append(p.get("request", {}).get("url", ""))

    def wait_for(self, method: str, *, timeout: float) -> dict[str, Any]:
        """Record events until this page's ``method`` event arrives (within ``timeout`` s)."""
        for msg in self.browser.events(timeout):
            self._record(msg)
            if msg.get("method") == method and msg.get("sessionId") == self.session:
                return msg.get("params", {})
        raise CDPError(f"no {method} within {timeout:g} s")

    def drain(self) -> None:
        """Record the events that arrived so far."""
        for msg in self.browser.events(0.2):
            self._record(msg)

    def evaluate(self, expression: str, *, await_promise: bool = False, timeout: float = 300.0) -> Any:
        """The value of a JavaScript expression (JSON-serialisable), a thrown error as CDPError."""
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": await_promise},
                              session=self.session, timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            what = d.get("exception", {}).get("description") or d.get("text")
            raise CDPError(f"{expression[:60]}...: {what}")
        self.drain()
        return r.get("result", {}).get("value")

    def screenshot(self, *, clip: tuple[int, int, int, int] | None = None) -> bytes:
        """A PNG of the viewport, or of ``clip`` = (x, y, width, height) CSS pixels of the page."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            x, y, w, h = clip
            params["clip"] = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        return base64.b64decode(data)
