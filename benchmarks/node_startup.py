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
  loaded and (estimator) its target's base parameters (from their disk cache,
  ``core/model/base_cache.py``) and session built, and every publisher, subscription, service and
  timer is in place: a message published from then on is received and a service call answered.
* **first** [s of wall time], for the nodes that process joint states (estimator,
  collision_monitor): ``Popen`` to the node's first ``~/progress``, i.e. to the first joint state
  *processed*, with joint states (the default robot's joints, moving, stamped at 500 Hz, sent in
  bursts of 5 every 10 ms) published from the ready line on. What a node sets up on its first
  samples is here: the compiled kernels of the filters and regressors (numba's import and CPU
  target, the kernels' disk cache), DDS discovery of the publisher. The estimator sets them up in
  a thread of its own from its ready line on (``OnlineSession.prepare``), so this is the honest
  figure of when it is useful; ``ready`` is when it is in the graph (subscribed, answering).
* **cpu** [s]: user + system CPU time of the node's process (every thread) at that line,
  ``/proc/<pid>/stat``: what start-up costs whatever share of the cores the host leaves it. It
  includes what a thread started at that line (the estimator's and collision monitor's kernel
  set-up, the recorder's bag opening) did before this script read the log (polled every 10 ms;
  later on a host that leaves this script little CPU).
* **share** = cpu / ready: the cores' worth the process got while starting. A start-up that only
  computes has ``share`` ≈ min(1, cores / runnable tasks) (2 cores at load 20: ~0.1); a start-up
  that waits (a sleep, a timer, DDS discovery, a thread that cannot get a core) has less. Wall time
  beyond ``cpu / share`` of that kind would be a wait; none was found (constructor timelines with
  ``time.perf_counter``/``time.process_time`` marks, ``python -X importtime``): on this host the
  wall time is the CPU time divided by the share the load leaves.

    python benchmarks/node_startup.py [--hogs 0 2] [--repeat 3] [--nodes mujoco_sim estimator ...]

A fresh clone's first estimator start also compiles the kernels (numba's disk cache beside the
sources is empty: ~20 s of CPU once); the figures are of a checkout that ran it before.
"""

from __future__ import annotations

import argparse
import math
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
    "damiao_bridge": ("yam_damiao", ["use_emulator:=true", "autostart:=false"], "ready, unconfigured"),
}
#: nodes that process joint states and say how far on ``~/progress`` (the "first" column)
FED = ("estimator", "collision_monitor")
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


class Probe:
    """Joint states for a node under test, and the time of its first ``~/progress``: a node of
    this process in the benchmark's domain."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from builtin_interfaces.msg import Time
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState

        from sysid_ros.core.model.robot import RobotModel
        from sysid_ros.core.resources import default_robot_path

        self.names = list(RobotModel.load(default_robot_path()).dof_joint_names)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node("startup_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.pub = self.node.create_publisher(JointState, "/joint_states", 100)
        self.msg_type, self.time_type = JointState, Time

    def first_progress(self, node: str, proc: subprocess.Popen, t0: float, limit: float) -> float:
        """[s] from ``t0`` to ``node``'s first ``~/progress``, publishing joint states meanwhile
        (NaN: none within ``limit`` s of ``t0``)."""
        from sysid_ros.nodes.qos import PROGRESS

        got: list[float] = []
        sub = self.node.create_subscription(self.time_type, f"/{node}/progress",
                                            lambda _msg: got.append(time.monotonic()), PROGRESS)
        n, k = len(self.names), 1
        try:
            while not got and time.monotonic() - t0 < limit and proc.poll() is None:
                for _ in range(5):
                    t = k * 0.002  # [s] 500 Hz stamps
                    msg = self.msg_type(name=self.names, position=[0.1 * math.sin(2 * math.pi * t + i)
                                                                   for i in range(n)],
                                        velocity=[0.2 * math.pi * math.cos(2 * math.pi * t + i)
                                                  for i in range(n)], effort=[0.0] * n)
                    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(k * 2_000_000, 1_000_000_000)
                    self.pub.publish(msg)
                    k += 1
                self.executor.spin_once(timeout_sec=0.01)
        finally:
            self.node.destroy_subscription(sub)
        return got[0] - t0 if got else float("nan")

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def measure(node: str, domain: int, tmp: Path, probe: Probe | None = None
            ) -> tuple[float, float, float, float, int]:
    """(time-to-ready [s], CPU time to ready [s], time to first progress [s] (NaN unless
    ``probe``), SIGINT-to-exit [s], exit status) of one start of ``node``."""
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
        first = float("nan")
        if probe is not None and started == started:
            first = probe.first_progress(node, proc, t0, START_LIMIT)
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
    return started, cpu, first, stopped, proc.returncode


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
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    probe = Probe(args.domain) if set(args.nodes) & set(FED) else None
    for hogs in args.hogs:
        print("== beside " + (f"stress-ng --cpu {hogs}" if hogs else "nothing of ours"))
        print(f"{'node':22s} {'ready p50':>10s} {'ready max':>10s} {'cpu p50':>8s} {'share':>6s} "
              f"{'first p50':>10s} {'first max':>10s} "
              f"{'exit p50':>9s} {'exit max':>9s}  "
              "status  load before")
        for node in args.nodes:
            ready, cpu, first, stop, codes, loads = [], [], [], [], [], []
            for _ in range(args.repeat):
                loads.append(os.getloadavg()[0])
                hog = (subprocess.Popen(["stress-ng", "--cpu", str(hogs), "--timeout", "60"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       if hogs else None)
                try:
                    with tempfile.TemporaryDirectory(prefix="sysid_startup_") as tmp:
                        r, u, f, s, c = measure(node, args.domain, Path(tmp),
                                                probe if node in FED else None)
                finally:
                    if hog is not None:
                        hog.send_signal(signal.SIGINT)
                        hog.wait()
                ready.append(r)
                cpu.append(u)
                first.append(f)
                stop.append(s)
                codes.append(c)
            share = statistics.median(u / r for u, r in zip(cpu, ready, strict=True))
            seen = [f for f in first if f == f]  # (NaN: no ~/progress within START_LIMIT)
            fed = (f"{statistics.median(seen):9.2f}s {max(seen):9.2f}s" if seen
                   else f"{'none':>10s} {'':>10s}")
            if node in FED and len(seen) < len(first):
                fed += f" ({len(first) - len(seen)} without progress in {START_LIMIT:g} s)"
            if node not in FED:
                fed = f"{'-':>10s} {'-':>10s}"
            print(f"{node:22s} {statistics.median(ready):9.2f}s {max(ready):9.2f}s "
                  f"{statistics.median(cpu):7.2f}s {share:6.2f} {fed} "
                  f"{statistics.median(stop):8.2f}s {max(stop):8.2f}s  {sorted(set(codes))}  "
                  f"{' '.join(f'{v:.1f}' for v in loads)}")


if __name__ == "__main__":
    main()
