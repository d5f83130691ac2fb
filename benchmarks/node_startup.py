"""Start-up and shutdown time of every node executable, idle and beside CPU hogs.

Each node is started as ``ros2 run`` starts it (``python -m sysid_ros.nodes.<node>`` with its
``config/<node>.yaml``, in a private DDS domain on loopback) and timed from ``Popen`` to the log line
its constructor writes last; then SIGINT, and the time until the process has exited and its status.
Under ``--hogs N`` each measurement runs beside ``stress-ng --cpu N`` (started for at most 60 s per
node, stopped after it). Targets (issue 24): ready under 3 s beside two CPU hogs, exit within 2 s of
SIGINT, status 0. The load average before each run is printed: the host is shared.

What the figures mean:

* **start-up (ready)** [s of wall time]: ``Popen`` to the constructor's last log line. By then the
  interpreter has started, the node's modules are imported, its parameters declared, its model
  loaded and (estimator) its target's base parameters and session built, and every publisher,
  subscription, service and timer is in place: a message published from then on is received and
  a service call answered. Nothing of the node's is deferred to after that line (the estimator's
  compiled kernels are typed in its constructor), so no "time to first output" differs from it but
  by the work of that output itself.
* **cpu** [s]: user + system CPU time of the node's process (every thread) at that line,
  ``/proc/<pid>/stat``: what start-up costs whatever share of the cores the host leaves it.
* **share** = cpu / ready: the cores' worth the process got while starting. A start-up that only
  computes has ``share`` ≈ min(1, cores / runnable tasks) (2 cores at load 20: ~0.1); a start-up
  that waits (a sleep, a timer, DDS discovery, a thread that cannot get a core) has less. Wall time
  beyond ``cpu / share`` of that kind would be a wait; none was found (constructor timelines with
  ``time.perf_counter``/``time.process_time`` marks, ``python -X importtime``): on this host the
  wall time is the CPU time divided by the share the load leaves.

    python benchmarks/node_startup.py [--hogs 0 2] [--repeat 3] [--nodes mujoco_sim estimator ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core.resources import find_share_file  # noqa: E402

#: node -> (config file, extra parameters, the log line that says the node is ready)
NODES = {
    "mujoco_sim": ("mujoco_sim", [], "simulating "),
    "trajectory_publisher": ("trajectory_publisher", [], "excitation ready"),
    "estimator": ("estimator", [], "estimating "),
    "recorder": ("recorder", ["output:={tmp}/bag"], "recording ["),
    "batch_solver": ("batch_solver", ["data_root:={tmp}", "output_root:={tmp}/out"], "batch_solve ready"),
    "collision_monitor": ("collision_monitor", [], "monitoring "),
    "damiao_bridge": ("yam_damiao", ["use_emulator:=true", "autostart:=false"], "other threads"),
}
START_LIMIT = 120.0  # [s] a start slower than this is reported as a failure
STOP_LIMIT = 30.0  # [s] then SIGKILL


def cpu_seconds(pid: int) -> float:
    """CPU time [s] (user + system) the process ``pid`` has used so far (``/proc/<pid>/stat``):
    what start-up costs, whatever share of the cores the host leaves it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime [ticks]


def measure(node: str, domain: int, tmp: Path) -> tuple[float, float, float, int]:
    """(time-to-ready [s], CPU time to ready [s], SIGINT-to-exit [s], exit status) of one start
    of ``node``."""
    config, params, ready = NODES[node]
    cmd = [sys.executable, "-m", f"sysid_ros.nodes.{node}", "--ros-args",
           "--params-file", str(find_share_file(f"config/{config}.yaml"))]
    for p in params:
        cmd += ["-p", p.format(tmp=tmp)]
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    log = tmp / f"{node}.log"
    with open(log, "w") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        started = cpu = float("nan")
        while time.monotonic() - t0 < START_LIMIT and proc.poll() is None:
            if ready.lower() in log.read_text(errors="replace").lower():
                started = time.monotonic() - t0
                cpu = cpu_seconds(proc.pid)
                break
            time.sleep(0.01)  # polling a log file: the resolution of the figure
        t1 = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=STOP_LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stopped = time.monotonic() - t1
    if started != started:  # nan: never ready
        print(f"  {node}: not ready (status {proc.returncode}):\n{log.read_text()[-1500:]}")
    return started, cpu, stopped, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, nargs="+", default=[0, 2],
                        help="stress-ng --cpu N beside (0: idle)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nodes", nargs="+", default=list(NODES), choices=list(NODES))
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0) or 77)
    args = parser.parse_args()
    if any(args.hogs) and shutil.which("stress-ng") is None:
        sys.exit("stress-ng not found (apt-get install stress-ng)")
    for hogs in args.hogs:
        print("== beside " + (f"stress-ng --cpu {hogs}" if hogs else "nothing of ours"))
        print(f"{'node':22s} {'ready p50':>10s} {'ready max':>10s} {'cpu p50':>8s} {'share':>6s} "
              f"{'exit p50':>9s} {'exit max':>9s}  "
              "status  load before")
        for node in args.nodes:
            ready, cpu, stop, codes, loads = [], [], [], [], []
            for _ in range(args.repeat):
                loads.append(os.getloadavg()[0])
                hog = (subprocess.Popen(["stress-ng", "--cpu", str(hogs), "--timeout", "60"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       if hogs else None)
                try:
                    with tempfile.TemporaryDirectory(prefix="sysid_startup_") as tmp:
                        r, u, s, c = measure(node, args.domain, Path(tmp))
                finally:
                    if hog is not None:
                        hog.send_signal(signal.SIGINT)
                        hog.wait()
                ready.append(r)
                cpu.append(u)
                stop.append(s)
                codes.append(c)
            share = statistics.median(u / r for u, r in zip(cpu, ready, strict=True))
            print(f"{node:22s} {statistics.median(ready):9.2f}s {max(ready):9.2f}s "
                  f"{statistics.median(cpu):7.2f}s {share:6.2f} "
                  f"{statistics.median(stop):8.2f}s {max(stop):8.2f}s  {sorted(set(codes))}  "
                  f"{' '.join(f'{v:.1f}' for v in loads)}")


if __name__ == "__main__":
    main()
