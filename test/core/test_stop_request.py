"""The stop request of :func:`sysid_ros.nodes.spin` survives a signal whose handler runs in the
middle of it: a second Ctrl-C (or launch's SIGINT after the terminal's) at any instant.

Python runs a handler in the main thread between two bytecodes, wherever that thread is. Here a
trace hook raises SIGINT before every line of the request's own code, so the handler (which
requests the stop again) runs inside it at each possible point. A ``threading.Event`` deadlocks
under the same test (the handler waits for the lock its own thread holds): that control shows the
test catches the failure ``sysid demo`` met (its recorder deadlocked by two SIGINTs 1 ms apart).
Each case runs in a subprocess, so a deadlock is a bounded failure, not a hang.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

SCRIPT = r"""
import signal, sys, threading
from sysid_ros.core.stop_request import StopRequest

kind = sys.argv[1]
stop = StopRequest() if kind == "stop_request" else threading.Event()
request = stop.request if kind == "stop_request" else stop.set
wait = stop.wait
own = {type(stop).__module__}
handled = []
inside = [False]

def handler(signum, frame):
    inside[0] = True
    request()  # what spin's handler does on every signal
    handled.append(signum)
    inside[0] = False

def tracer(frame, event, arg):
    if frame.f_globals.get("__name__") in own or frame.f_code.co_filename.endswith("threading.py"):
        return local
    return None

def local(frame, event, arg):
    if event == "line" and not inside[0]:
        signal.raise_signal(signal.SIGINT)  # its handler runs before the next line
    return local

signal.signal(signal.SIGINT, handler)
print("ready", flush=True)
sys.settrace(tracer)
request()
wait()
sys.settrace(None)
print(f"stopped after {len(handled)} signals", flush=True)
"""

BOUND = 20.0  # [s] after "ready": the whole run takes milliseconds; a deadlock never ends


def _run(kind: str) -> tuple[bool, str]:
    """(ended, output) of the script for ``kind``; a process still running ``BOUND`` s after it
    said "ready" is killed (deadlocked)."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, kind], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    first = proc.stdout.readline()  # the import and set-up, however long a loaded host takes
    assert first == "ready\n", first + proc.stdout.read()
    deadline = time.monotonic() + BOUND
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a bounded wait
    ended = proc.poll() is not None
    if not ended:
        proc.kill()
    return ended, proc.communicate()[0]


def test_a_signal_inside_the_stop_request_does_not_deadlock():
    ended, output = _run("stop_request")
    assert ended, "the stop request deadlocked under a signal raised inside it"
    count = int(output.split("stopped after ")[1].split()[0])
    assert count >= 3, output  # the handler ran inside request() at several points


@pytest.mark.timeout(120)
def test_control_a_threading_event_deadlocks_under_the_same_signals():
    ended, output = _run("event")
    assert not ended, f"the control did not deadlock: {output}"
