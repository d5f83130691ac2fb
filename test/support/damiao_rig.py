"""Test rigs of the Damiao hardware tests: the bridge against emulated motors on a python-can
virtual bus with every frame observed by a bus monitor, and a ROS 2 probe (private context)
that listens to and commands a bridge over DDS.

The rig is what the frames are checked against: after the frame that shows a fault (or the cycle
whose replies exceed the missed-reply limit) the bridge's next frames must be the disable frames
``FF…FD`` to every motor — no further MIT round in between, i.e. within the same control period.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import can

from sysid_ros.hardware.bridge import Bridge
from sysid_ros.hardware.bridge_config import BridgeConfig, load_bridge_config
from sysid_ros.hardware.codec import MitLimits, MotorState, Special, parse_special
from sysid_ros.hardware.emulated_bus import EmulatedBus, EmulatorOptions
from sysid_ros.hardware.realtime import raise_process_threads, restore_threads

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIG = ROOT / "config" / "yam_damiao.yaml"
RATE = 250.0  # [Hz] in-process tests on a shared, loaded machine (1 kHz is the benchmark's business)
WAIT = 10.0   # [s] bound of every wait on a condition
N_JOINTS = 6
DM4340, DM4310 = MitLimits(12.5, 10.0, 28.0), MitLimits(12.5, 30.0, 10.0)  # the emulator's registers


def wait_until(predicate, timeout: float = WAIT, poll: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def rig_config(**overrides) -> BridgeConfig:
    """The package's YAM configuration at the tests' rate, tolerant of a stalled machine."""
    # tests not about missed replies or the motors' CAN timeout tolerate stalls: this process also
    # runs pytest, the rig's monitor and the test's own thread beside the loop, sharing one
    # interpreter lock (the node runs its loop in a process of its own for that reason); at load
    # 17 beside stress-ng --cpu 4 a 0.1 s CAN timeout expired in-process (0xD) in two failsafe tests.
    # motor_timeout_max (0.5 s) is the most the node itself would choose for a slow loop.
    values = dict(rate=RATE, max_missed_replies=50, motor_timeout=0.5)
    values.update(overrides)
    return load_bridge_config(CONFIG, **values)


@dataclass
class Frame:
    stamp: float
    arbitration_id: int
    data: bytes
    error: bool


@dataclass
class Monitor(can.Listener):
    """Every frame on the channel, in bus order."""

    frames: list[Frame] = field(default_factory=list)

    def on_message_received(self, msg: can.Message) -> None:
        self.frames.append(Frame(msg.timestamp, msg.arbitration_id, bytes(msg.data), msg.is_error_frame))

    def snapshot(self) -> list[Frame]:
        return list(self.frames)


class Rig:
    """Emulated YAM motors (an :class:`EmulatedBus`), a bus monitor and a bridge on one channel.

    ``clock="lockstep"`` (default): the emulator's physics advances one control period per command
    round and the bridge runs on that time base (its replies are awaited up to 50 ms), so a loaded
    machine slows the run down instead of making replies late; ``"realtime"``: wall-clock physics
    and time base, as on hardware."""

    def __init__(self, config: BridgeConfig, *, initial_pose="home", on_sample=None,
                 clock: str = "lockstep") -> None:
        pose = None if isinstance(initial_pose, str) else initial_pose
        options = EmulatorOptions(clock=clock, initial_pose=initial_pose if pose is None else "home")
        self.emulated = EmulatedBus(config.joints, period=config.period, options=options, initial_pose=pose)
        self.config = config.replace(interface="virtual", channel=self.emulated.channel)
        self.emulator = self.emulated.emulator
        self.bus = self.emulated.bus
        self.monitor_bus = can.Bus(interface="virtual", channel=self.emulated.channel)
        self.monitor = Monitor()
        self.notifier = can.Notifier(self.monitor_bus, [self.monitor], timeout=0.05)
        # as the bridge node does for its process: the monitor's notifier (it takes the GIL for
        # every frame) and any DDS threads at SCHED_FIFO 1 while the rig is open, so that none is
        # preempted by a CPU hog while holding the GIL the real-time loop needs (restored at
        # close). Not the test's own thread: a CPU-bound real-time thread (hypothesis) runs into
        # the kernel's real-time throttling, which stops the loop too
        self._raised, _ = raise_process_threads(1, exclude=frozenset({threading.main_thread().native_id}))
        self.samples: list = []
        self.trips: list = []
        self.done = threading.Event()
        self.bridge = Bridge(self.config, bus=self.bus, on_sample=on_sample or self.samples.append,
                             on_trip=self.trips.append, on_replay_done=self.done.set,
                             timebase=self.emulated.timebase)
        self._closed = False
        self.emulated.start()

    def close(self) -> None:
        """Motors disabled, threads and buses released (idempotent: the fixture closes every rig
        it made, a test may close one earlier)."""
        if self._closed:
            return
        self._closed = True
        self.bridge.shutdown()
        self.emulated.close()
        self.notifier.stop()
        self.monitor_bus.shutdown()
        restore_threads(self._raised)

    def states(self) -> list[MotorState]:
        return [m.state for m in self.emulator.motors]

    def run_cycles(self, count: int) -> None:
        start = len(self.samples)
        assert self.wait_running(lambda: len(self.samples) >= start + count), "the control loop stalled"

    def wait_running(self, predicate, stall: float = WAIT, cap: float = 120.0) -> bool:
        """Wait until ``predicate()`` while the control loop makes progress: ``False`` once no cycle
        has run for ``stall`` seconds (a trip, a dead loop) or after ``cap`` seconds in all. A
        loaded machine slows a lockstep run down (each round waits for the emulator's replies);
        it does not stop it, so a fixed bound on the whole run would fail a healthy run."""
        deadline = time.monotonic() + cap
        last, seen = self.bridge.cycles, time.monotonic()
        while not predicate():
            now = time.monotonic()
            cycles = self.bridge.cycles
            if cycles != last:
                last, seen = cycles, now
            elif now - seen > stall or now > deadline:
                return False
            time.sleep(0.002)
        return True

    def full_sample(self):
        """The latest sample in which every motor replied (waits for one, bounded)."""
        def found():
            return next((s for s in reversed(self.samples) if s.fresh.all()), None)

        assert self.wait_running(lambda: found() is not None), "no cycle in which every motor replied"
        return found()


def is_special(frame: Frame, kind: Special) -> bool:
    return 1 <= frame.arbitration_id <= N_JOINTS and parse_special(frame.data) == kind


def is_mit(frame: Frame) -> bool:
    return 1 <= frame.arbitration_id <= N_JOINTS and parse_special(frame.data) is None


def assert_disabled_right_after(frames: list[Frame], index: int) -> list[Frame]:
    """After ``frames[index]`` (where the fault shows) the bridge sends no MIT frame before the
    disable frames to all six motors. Returns the disable frames."""
    later = [f for f in frames[index + 1:] if 1 <= f.arbitration_id <= N_JOINTS]
    first_disable = next(k for k, f in enumerate(later) if is_special(f, Special.DISABLE))
    before = later[:first_disable]
    # only the rest of the same MIT round may precede: no motor gets two MIT frames
    ids = [f.arbitration_id for f in before if is_mit(f)]
    assert len(ids) == len(set(ids)), f"a new MIT round was sent before disabling: {ids}"
    disables = [f for f in later[first_disable:] if is_special(f, Special.DISABLE)]
    assert {f.arbitration_id for f in disables} == set(range(1, N_JOINTS + 1))
    return disables


def unique_channel(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Listener:
    """A private rclpy context with a spinning executor, collecting the bridge's joint states and
    diagnostics (root-namespace topics) and publishing commands."""

    def __init__(self, domain_id: int, name: str = "bridge_test") -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from sysid_ros.msg import MotorCommand

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.states: list = []  # (receive time [s, monotonic], JointState)
        self.diagnostics: list = []
        # every state kept until taken: this process's executor, starved beside CPU hogs, fell over
        # 2 s behind the bridge's 500 Hz (a depth of 1000 then dropped the oldest: 18 of 250 left)
        reliable = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, "/joint_states",
                                      lambda m: self.states.append((time.monotonic(), m)), reliable)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self._command_type = MotorCommand
        self.commands = self.node.create_publisher(MotorCommand, "/motor_command", 10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def add(self, node) -> None:
        self.executor.add_node(node)

    def status(self, name: str):
        """The latest ``DiagnosticStatus`` called ``name``, ``None`` before any."""
        for array in reversed(list(self.diagnostics)):
            for s in array.status:
                if s.name == name:
                    return s
        return None

    def command(self, names, position) -> None:
        self.commands.publish(self._command_type(name=list(names), position=[float(x) for x in position]))

    def call(self, client, request, timeout: float = WAIT):
        assert client.wait_for_service(timeout_sec=timeout), f"no service {client.srv_name}"
        future = client.call_async(request)
        assert wait_until(future.done, timeout), f"{client.srv_name} did not answer"
        return future.result()

    def close(self) -> None:
        """Stop the spin thread, then the executor (its guard condition destroyed under a spinning
        thread made rclpy's handler call ``None.trigger()``), then the node and the context."""
        self._stop.set()
        self._thread.join(timeout=30)
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


def rigs():
    """A pytest fixture body (``rig_factory = pytest.fixture(rigs, name="rig_factory")``):
    ``make(**overrides) -> Rig`` on the YAM configuration with the overrides (plus
    ``initial_pose``, ``on_sample``, ``clock``), all closed after the test (motors disabled)."""
    rigs = []

    def make(**kwargs) -> Rig:
        options = {k: kwargs.pop(k) for k in ("initial_pose", "on_sample", "clock") if k in kwargs}
        rig = Rig(rig_config(**kwargs), **options)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()
