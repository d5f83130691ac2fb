"""The recorder node as a process over real DDS: lossless, loss counts, kill -9 recovery, signals.

A publisher in this test streams stamped ``JointState`` messages (stamp k = k * period); the
recorder (``python -m sysid_ros.nodes.recorder``) writes a real MCAP bag; ``~/progress`` says
which data time is in the bag file. Every check is on the bag read back (rosbags) and on the
recorder's exit status, log and ``~/stop`` answer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import rclpy
from builtin_interfaces.msg import Time
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from support.ros import SpinningNode
from support.waits import stop_process, wait_until

from sysid_ros.core.data.bag import bag_custom_data, header_stamp_ns, partial_folders, read_bag
from sysid_ros.nodes.qos import PROGRESS

pytestmark = pytest.mark.ros
START_TIMEOUT = 60.0  # s: a node process's start on a loaded 2-core machine
JS = "sensor_msgs/msg/JointState"


class Output:
    """A process's merged output, collected by a thread; :meth:`wait` for a line (bounded)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.lines.append("")  # end of output
            self._cond.notify_all()

    def wait(self, needle: str, timeout: float = START_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                if (self.lines and self.lines[-1] == "") or time.monotonic() > deadline:
                    pytest.fail(f"no line with {needle!r}:\n{self.text}")
                self._cond.wait(0.1)

    def finish(self, timeout: float = 30.0) -> str:
        self.proc.wait(timeout=timeout)
        with self._cond:
            while not self.lines or self.lines[-1] != "":
                self._cond.wait(1.0)
        return self.text

    @property
    def text(self) -> str:
        return "".join(self.lines)


def start_recorder(domain_id: int, output, *params: str) -> Output:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "sysid_ros.nodes.recorder", "--ros-args", "-p", f"output:={output}",
           "-p", "topics:=['/joint_states']"]
    for p in params:
        cmd += ["-p", p]
    out = Output(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out.wait("recording ['/joint_states'] into")
    return out


class Graph(SpinningNode):
    """This test's ROS side: a JointState publisher, the recorder's ~/progress and ~/stop."""

    def __init__(self, domain_id: int, reliable: bool = True) -> None:
        super().__init__("recorder_test", domain_id)
        qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, durability=DurabilityPolicy.VOLATILE,
                         reliability=(ReliabilityPolicy.RELIABLE if reliable
                                      else ReliabilityPolicy.BEST_EFFORT))
        self.pub = self.node.create_publisher(JointState, "/joint_states", qos)
        self.progress_ns = -1
        self.node.create_subscription(Time, "/recorder/progress", self._on_progress, PROGRESS)
        self.stop_client = self.node.create_client(Trigger, "/recorder/stop")
        self.sent = 0

    def _on_progress(self, msg: Time) -> None:
        self.progress_ns = max(self.progress_ns, msg.sec * 1_000_000_000 + msg.nanosec)

    def wait_for_recorder(self) -> None:
        wait_until(lambda: self.pub.get_subscription_count() >= 1
                   and self.node.count_publishers("/recorder/progress") >= 1, START_TIMEOUT,
                   "the recorder's subscription")

    def message(self, k: int, period_ns: int) -> JointState:
        ns = k * period_ns
        msg = JointState(name=[f"joint{i}" for i in range(1, 7)], position=[0.001 * k] * 6,
                         velocity=[0.0] * 6, effort=[1.0] * 6)
        msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
        return msg

    def stream(self, rate: float, count: int | None, stop: threading.Event | None = None) -> None:
        """Publish stamped states at ``rate`` (0 = as fast as possible), ``count`` or until ``stop``."""
        period_ns = round(1e9 / rate) if rate else 100_000
        t0 = time.perf_counter()
        k = 0
        while (count is None or k < count) and not (stop is not None and stop.is_set()):
            if rate:
                ahead = t0 + k / rate - time.perf_counter()
                if ahead > 0.002:
                    time.sleep(ahead)  # pacing of the stream, not synchronisation
            self.publish(self.pub, self.message(k, period_ns))
            k += 1
            self.sent = k

    def stop_recorder(self, timeout: float = 40.0):
        assert self.stop_client.wait_for_service(timeout_sec=START_TIMEOUT)
        future = self.stop_client.call_async(Trigger.Request())
        wait_until(future.done, timeout, "the ~/stop answer")
        return future.result()


@pytest.fixture
def graph(ros_domain_id):
    graphs = []

    def make(reliable: bool = True) -> Graph:
        graphs.append(Graph(ros_domain_id, reliable))
        return graphs[-1]

    yield make
    for g in graphs:
        g.close()


def bag_stamps(path) -> list[int]:
    with Reader(path) as reader:
        return [header_stamp_ns(raw) for _, _, raw in reader.messages()]


@pytest.mark.timeout(180)
def test_a_killed_recorder_leaves_a_bag_that_recover_rebuilds(tmp_path, graph, ros_domain_id):
    bag = tmp_path / "killed"
    rec = start_recorder(ros_domain_id, bag, f"types:=['{JS}']")
    g = graph()
    g.wait_for_recorder()
    stop = threading.Event()
    streamer = threading.Thread(target=g.stream, args=(500.0, None, stop), daemon=True)
    streamer.start()
    try:
        wait_until(lambda: g.progress_ns >= 1_000_000_000, 60, "1 s of data in the bag")
        rec.proc.send_signal(signal.SIGKILL)  # mid-recording, the stream still running
        rec.finish()
    finally:
        stop.set()
        streamer.join(timeout=10)
        stop_process(rec.proc)
    acknowledged = g.progress_ns  # (progress sent before the kill may arrive after it: still acknowledged)
    assert rec.proc.returncode == -signal.SIGKILL
    assert not bag.exists() and len(partial_folders(bag)) == 1
    with pytest.raises(Exception, match="recording was interrupted; run `sysid bag recover"):
        read_bag(bag)
    out = subprocess.run([sys.executable, "-m", "sysid_ros.cli", "bag", "recover", str(bag)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stamps = bag_stamps(bag)
    assert f"/joint_states: {len(stamps)} messages recovered, 0 missing in stamp gaps" in out.stdout
    expected = list(range(0, acknowledged + 1, 2_000_000))  # every state up to the acknowledged one
    assert stamps[:len(expected)] == expected, (len(stamps), len(expected))
    assert len(set(stamps)) == len(stamps) and stamps == sorted(stamps)  # no duplicates
    assert bag_custom_data(bag)["sysid_ros.recovered./joint_states"] == str(len(stamps))
    assert len(read_bag(bag)) == len(stamps)
    assert partial_folders(bag) == []


@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["two_sigints_50ms_apart", "sigint_while_finishing"])
def test_signals_during_shutdown_keep_the_bag_complete(tmp_path, graph, ros_domain_id, how):
    bag = tmp_path / how
    rec = start_recorder(ros_domain_id, bag, f"types:=['{JS}']")
    g = graph()
    g.wait_for_recorder()
    count = 1500
    try:
        g.stream(1000.0, count)
        wait_until(lambda: g.progress_ns >= (count - 1) * 1_000_000, 60, "every state in the bag")
        if how == "two_sigints_50ms_apart":
            rec.proc.send_signal(signal.SIGINT)
            time.sleep(0.05)  # the scenario: a second Ctrl-C 50 ms later
            rec.proc.send_signal(signal.SIGINT)
        else:
            g.stop_client.call_async(Trigger.Request())
            rec.wait("finishing bag", timeout=60)
            rec.proc.send_signal(signal.SIGINT)  # ends the node once the bag is finished
        text = rec.finish(timeout=60)
    finally:
        stop_process(rec.proc)
    assert rec.proc.returncode == 0, text
    assert "bag finished" in text, text
    assert partial_folders(bag) == []
    assert bag_stamps(bag) == [k * 1_000_000 for k in range(count)]


@pytest.mark.timeout(240)
def test_a_burst_at_10_khz_is_recorded_whole(tmp_path, graph, ros_domain_id):
    """5000 stamped states at 10 kHz (a 0.5 s burst) through a reliable KEEP_ALL publisher: every
    one received, written in order, nothing counted lost or missing."""
    bag = tmp_path / "burst"
    rec = start_recorder(ros_domain_id, bag, f"types:=['{JS}']")
    g = graph()
    g.wait_for_recorder()
    count = 5_000
    try:
        g.stream(10_000.0, count)
        assert g.pub.wait_for_all_acked(rclpy.duration.Duration(seconds=120))
        wait_until(lambda: g.progress_ns >= (count - 1) * 100_000, 120, "the whole burst in the bag")
        answer = g.stop_recorder()  # the bag is finished; the node runs on until Ctrl-C
        rec.proc.send_signal(signal.SIGINT)
        text = rec.finish(timeout=60)
    finally:
        stop_process(rec.proc)
    assert answer.success and answer.message == str(bag), answer.message
    assert rec.proc.returncode == 0, text
    assert f"/joint_states: received {count}, written {count}, lost 0 (DDS), 0 missing in stamp gaps" in text
    assert "lost data" not in text
    assert bag_stamps(bag) == [k * 100_000 for k in range(count)]
    custom = bag_custom_data(bag)
    assert custom["sysid_ros.lost./joint_states"] == "0"
    assert custom["sysid_ros.gaps./joint_states"] == "0"


@pytest.mark.timeout(240)
def test_losses_of_a_best_effort_flood_are_counted_and_reported(tmp_path, graph, ros_domain_id):
    bag = tmp_path / "flood"
    g = graph(reliable=False)  # the type is discovered: the recorder matches the best-effort publisher
    rec = start_recorder(ros_domain_id, bag, "discovery_period:=0.05")
    try:
        rec.wait("recording /joint_states (sensor_msgs/msg/JointState)")
        g.wait_for_recorder()
        # as fast as Python publishes, the recorder stopped (SIGSTOP) for the middle 20,000: it
        # takes a burst per executor wake-up and can keep up with one Python publisher otherwise
        flood = threading.Thread(target=g.stream, args=(0.0, 30_000))
        flood.start()
        try:
            wait_until(lambda: g.sent >= 5_000, 60, "the flood's first 5,000")
            rec.proc.send_signal(signal.SIGSTOP)
            wait_until(lambda: g.sent >= 25_000, 120, "the flood's next 20,000")
        finally:
            rec.proc.send_signal(signal.SIGCONT)
            flood.join(120)
        answer = g.stop_recorder()  # the bag is finished; the node runs on until Ctrl-C
        rec.proc.send_signal(signal.SIGINT)
        text = rec.finish(timeout=60)
    finally:
        stop_process(rec.proc)
    assert rec.proc.returncode == 0, text
    custom = bag_custom_data(bag)
    lost, gaps = int(custom["sysid_ros.lost./joint_states"]), int(custom["sysid_ros.gaps./joint_states"])
    written = len(bag_stamps(bag))
    assert lost > 0 and gaps > 0, (lost, gaps, written)
    assert written + gaps <= 30_000
    assert answer.success and "LOST DATA: /joint_states:" in answer.message, answer.message
    assert f"{lost} lost (DDS), {gaps} missing in stamp gaps" in answer.message
    assert "WARN" in text and "the recording lost data" in text, text


@pytest.mark.timeout(180)
def test_a_driver_s_currents_are_stored_unscaled(tmp_path, graph, ros_domain_id):
    """The recorder stores ``/joint_states`` as the driver sent it: an ``effort`` in amperes (a
    driver publishing motor currents) comes back from the bag bit for bit, never multiplied by a
    torque constant (the conversion is the solve's: ``torque_scale``/``torque_offset`` of
    BatchSolve or ``sysid identify --torque-scale``, docs/ros2_control.md)."""
    from sysid_ros.core.data.bag import typestore

    currents = [0.731, -1.25, 2.0e-3, 3.5, -0.0625, 1.0 / 3.0]  # [A]
    bag = tmp_path / "currents"
    rec = start_recorder(ros_domain_id, bag, f"types:=['{JS}']")
    g = graph()
    g.wait_for_recorder()
    count = 200
    try:
        for k in range(count):
            msg = g.message(k, 2_000_000)
            msg.effort = [c * (1 + k) for c in currents]
            g.publish(g.pub, msg)
        wait_until(lambda: g.progress_ns >= (count - 1) * 2_000_000, 120, "every state in the bag")
        answer = g.stop_recorder()
        rec.proc.send_signal(signal.SIGINT)
        text = rec.finish(timeout=60)
    finally:
        stop_process(rec.proc)
    assert answer.success and rec.proc.returncode == 0, text
    store = typestore()
    with Reader(bag) as reader:
        efforts = [list(store.deserialize_cdr(raw, JS).effort) for _, _, raw in reader.messages()]
    assert efforts == [[c * (1 + k) for c in currents] for k in range(count)]


@pytest.mark.timeout(180)
def test_a_recorder_stopped_at_its_ready_line_leaves_nothing(tmp_path, ros_domain_id):
    """The writer thread opens the bag once the node is ready: a SIGINT at the ready line (before
    or after that opening, whichever comes first) ends the node with status 0, says nothing was
    recorded and leaves no bag and no staging folder."""
    out = start_recorder(ros_domain_id, tmp_path / "bag")
    out.proc.send_signal(signal.SIGINT)
    text = out.finish()
    assert out.proc.returncode == 0, text
    assert f"nothing was recorded: no bag written at {tmp_path / 'bag'}" in text, text
    assert sorted(tmp_path.iterdir()) == []
