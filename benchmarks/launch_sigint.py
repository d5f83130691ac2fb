"""Shutdown of a real ``ros2 launch`` on Ctrl-C: one, or two at a given spacing, as a terminal sends it.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: ``ros2 launch`` and every
node it started (launch then sends no SIGINT of its own; it escalates to SIGTERM after
``sigterm_timeout``, 5 s). Here ``ros2 launch sysid_ros <file> ...`` runs in a session of its own,
in a temporary working directory and a private DDS domain, its stdin a terminal as in a shell
(``--noninteractive``: not, as in a script); once the run is under way (the line
``--ready`` in its output, plus ``--settle`` s) SIGINT goes to its process group once, or twice
``--spacing`` s apart. For each node the script prints the exit status launch reports (``process
has finished cleanly``: 0; ``process has died [... exit code N``) and the time from the first
SIGINT to that line, then the whole launch's exit. Target (issue 24): every node 0 within 2 s, no
-2 (a second signal cutting the shutdown short), no -15 (launch's escalation). The load average
before each run is printed: the host is shared.

Needs ``ros2 launch`` on PATH (a ROS install, or local launch tooling) and the package's install
space (``source tools/env.sh``).

    python benchmarks/launch_sigint.py [--file sim_identify.launch.py] [--spacing 0 0.1 0.3 1]
        [--repeat 1] [--domain 48] [ARG:=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FINISHED = re.compile(r"\[INFO\] \[([\w.-]+)\]: process has finished cleanly")
DIED = re.compile(r"\[ERROR\] \[([\w.-]+)\]: process has died \[pid \d+, exit code (-?\d+)")
STARTED = re.compile(r"\[INFO\] \[([\w.-]+)\]: process started with pid")


def run_once(file: str, arguments: list[str], spacing: float | None, domain: int, ready: str,
             settle: float, timeout: float, log: Path | None = None, interactive: bool = True) -> dict:
    """One launch, stopped by one SIGINT (``spacing`` None) or two; the nodes' statuses and times."""
    work = Path(tempfile.mkdtemp(prefix="sysid_launch_sigint_"))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    # stdin a terminal, as in a shell: ros2 launch is then interactive and leaves the Ctrl-C's SIGINT
    # to the nodes (the terminal sent it to them too); without one it also sends SIGINT to each
    terminal, tty = pty.openpty() if interactive else (None, subprocess.DEVNULL)
    proc = subprocess.Popen(["ros2", "launch", "sysid_ros", file, *arguments], cwd=work, env=env,
                            stdin=tty, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    if terminal is not None:
        os.close(tty)
    lines: list[tuple[float, str]] = []
    got_ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append((time.monotonic(), line))
            if ready in line:
                got_ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not got_ready.wait(timeout):
            raise SystemExit(f"no line {ready!r} within {timeout:.0f} s:\n"
                             + "".join(t for _, t in lines[-40:]))
        time.sleep(settle)  # (a benchmark: let the run go on a little before the Ctrl-C)
        first = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        if spacing is not None:
            time.sleep(spacing)
            os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        ended = time.monotonic() - first
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
        shutil.rmtree(work, ignore_errors=True)
        if terminal is not None:
            os.close(terminal)
    if log is not None:  # the launch's output, each line with its time from the first SIGINT [s]
        log.write_text("".join(f"{t - first:+8.3f} {text}" for t, text in lines))
    nodes: dict[str, tuple[int | None, float | None]] = {}
    for t, text in lines:
        if (m := STARTED.search(text)):
            nodes.setdefault(m.group(1), (None, None))
        elif (m := FINISHED.search(text)):
            nodes[m.group(1)] = (0, t - first)
        elif (m := DIED.search(text)):
            nodes[m.group(1)] = (int(m.group(2)), t - first)
    escalated = [text.strip() for _, text in lines
                 if "escalating to" in text or "sending signal 'SIG" in text]
    return {"nodes": nodes, "launch": proc.returncode, "ended": ended, "escalated": escalated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default="sim_identify.launch.py")
    parser.add_argument("--spacing", type=float, nargs="+", default=[0.0, 0.1, 0.3, 1.0],
                        help="[s] between the two SIGINTs; 0 = one SIGINT")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    parser.add_argument("--ready", default="excitation started", help="output line: the run is under way")
    parser.add_argument("--settle", type=float, default=2.0, help="[s] after --ready before the Ctrl-C")
    parser.add_argument("--timeout", type=float, default=600.0, help="[s] at most until --ready")
    parser.add_argument("--noninteractive", action="store_true",
                        help="stdin not a terminal (a script's launch: launch sends SIGINT to each node too)")
    parser.add_argument("--log", type=Path,
                        help="directory for each run's output (times from the first SIGINT)")
    parser.add_argument("arguments", nargs="*", help="launch arguments NAME:=VALUE")
    opts = parser.parse_args()
    if shutil.which("ros2") is None:
        raise SystemExit("ros2 is not on PATH: source a ROS install (or local launch tooling)")
    worst = 0.0
    bad = 0
    if opts.log:
        opts.log.mkdir(parents=True, exist_ok=True)
    for spacing in opts.spacing:
        for k in range(opts.repeat):
            load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
            r = run_once(opts.file, opts.arguments, spacing or None, opts.domain, opts.ready, opts.settle,
                         opts.timeout, opts.log / f"spacing{spacing:g}_{k}.log" if opts.log else None,
                         not opts.noninteractive)
            what = "one SIGINT" if not spacing else f"two SIGINTs {spacing:g} s apart"
            cells = []
            for name, (status, t) in sorted(r["nodes"].items()):
                cells.append(f"{name} {status} at {t:.2f} s" if t is not None else f"{name} never ended")
                bad += status != 0 or t is None or t > 2.0
                worst = max(worst, t or float("inf"))
            print(f"{what:<24} load {' '.join(load)}: " + "; ".join(cells)
                  + f"; launch exit {r['launch']} after {r['ended']:.2f} s", flush=True)
            for text in r["escalated"]:
                print(f"    {text}", flush=True)
    print(f"worst node exit {worst:.2f} s after the first SIGINT; {bad} node exit(s) not 0 within 2 s")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
