"""Node ``mujoco_sim``: the robot in MuJoCo under the motors' MIT law, standing in for hardware.

Subscribes ``motor_command`` (``sysid_ros/MotorCommand``); steps physics at ``rate`` [Hz] paced at
``real_time_factor`` × wall time (0 = as fast as the machine goes) in a thread of its own, so the
executor is free to take every command as it arrives; publishes ``joint_states``
(``sensor_msgs/JointState``, effort = applied torque) every ``publish_every`` steps, ``/clock``
(other nodes run with ``use_sim_time``) and, latched, ``sim/true_parameters``
(``sysid_ros/ParameterEstimate``): the simulated robot's true parameters, so estimates can be
scored. Topic names are relative (``/joint_states`` ... in the root namespace): move them by
namespace or remapping (``--ros-args -r joint_states:=/arm/joint_states``). The physics lives in
:class:`sysid_ros.core.sim.mit_simulator.MitSimulator` (stepping
:class:`sysid_ros.core.sim.plant.MitPlant`).
"""

from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.mit_simulator import MitSimulator, SimOptions
from sysid_ros.core.sim.plant import SensorModel
from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.msg import MotorCommand, ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_truth_msg
from sysid_ros.nodes.parameters import declare_parameters, parameter_value
from sysid_ros.resources import default_robot_path

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
# deep enough that a reliable subscriber that falls behind for a few seconds loses nothing
STREAM = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
#: longest sleep [s] of the stepping loop while it is ahead of its real-time factor
TICK = 0.002
PARAMETERS = (
    ("model_path", "", "MJCF of the robot ('' = the package's default robot)"),
    ("rate", 1000.0, "physics rate [Hz]"),
    ("real_time_factor", 1.0, "simulated seconds per wall second (0 = as fast as possible)"),
    ("publish_every", 1, "publish a JointState every this many physics steps"),
    ("clock_every", 10, "publish /clock every this many physics steps (every node using sim time "
                        "processes each /clock message)"),
    ("duration", 0.0, "stop stepping after this simulated time [s] (0 = run until shut down)"),
    ("payload", "", "payload 'body=NAME,mass=KG,com=X,Y,Z[,inertia=Ixx,Iyy,Izz,Ixy,Ixz,Iyz]' or ''"),
    ("floating_base", False, "free-floating base in zero gravity (orbital case)"),
    ("joint_friction", True, "keep the MJCF's friction loss and damping (false: frictionless joints)"),
    ("armature", True, "keep the MJCF's rotor (armature) inertia"),
    ("position_noise", 0.0, "position measurement noise σ [rad]"),
    ("velocity_noise", 0.0, "velocity measurement noise σ [rad/s]"),
    ("torque_noise", 0.0, "torque measurement noise σ [N·m]"),
    ("encoder_resolution", 0.0, "encoder quantisation [rad/count] (0 = ideal)"),
    ("noise_seed", 0, "seed of the measurement noise"),
    ("command_delay", 0.0, "delay before a command takes effect [s]"),
    ("measurement_delay", 0.0, "delay of the published measurements [s]"),
    ("command_timeout", 0.5, "silence after which the joints go limp [s] (simulated time)"),
    ("limp_damping", 0.5, "damping of limp joints [N·m·s/rad]"),
    ("initial_position", Parameter.Type.DOUBLE_ARRAY,
     "initial joint positions [rad] (unset = middle of the ranges)"),
    ("integrator", "euler", "euler (semi-implicit) | rk4"),
)
#: topics (relative: remap them, not parameters)
JOINT_STATES, MOTOR_COMMAND, CLOCK, TRUTH = "joint_states", "motor_command", "/clock", "sim/true_parameters"


class MujocoSimNode(Node):
    """Thin ROS facade over :class:`MitSimulator`."""

    def __init__(self, **kwargs) -> None:
        super().__init__("mujoco_sim", **kwargs)
        declare_parameters(self, PARAMETERS)
        model_path = self._get("model_path") or str(default_robot_path())
        self.model = RobotModel.from_mjcf(model_path)
        self.sim = MitSimulator(self.model, self._options())
        self.rate = float(self._get("rate"))
        self.rtf = float(self._get("real_time_factor"))
        self.publish_every = max(1, int(self._get("publish_every")))
        self.clock_every = max(1, int(self._get("clock_every")))
        self.duration = float(self._get("duration"))
        self.rejected = 0
        self._joint_msg = JointState()
        self._joint_msg.name = list(self.sim.joint_names)
        self._clock_msg = Clock()
        self._state_pub = self.create_publisher(JointState, JOINT_STATES, STREAM)
        self._clock_pub = self.create_publisher(Clock, CLOCK, 10)
        self._truth_pub = self.create_publisher(ParameterEstimate, TRUTH, LATCHED)
        self.create_subscription(MotorCommand, MOTOR_COMMAND, self._on_command, STREAM)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mujoco_sim_stepping", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"simulating {model_path} ({len(self.sim.joint_names)} joints) at {self.rate:g} Hz, "
            f"real-time factor {'max' if self.rtf <= 0 else f'{self.rtf:g}'}"
            + (f", payload {self._get('payload')}" if self._get("payload") else ""))
        self._publish_truth()  # last: the latched truth says the simulator is running

    def _get(self, name: str):
        return parameter_value(self, name)

    def _options(self) -> SimOptions:
        try:
            payload = Payload.parse(self._get("payload")) if self._get("payload") else None
        except SysIdError as exc:
            raise SysIdError(f"parameter payload: {exc}") from None
        initial = self._get("initial_position")
        sensor = SensorModel(self._get("position_noise"), self._get("velocity_noise"),
                             self._get("torque_noise"), self._get("encoder_resolution"),
                             int(self._get("noise_seed")))
        return SimOptions(
            rate=float(self._get("rate")), payload=payload, floating_base=bool(self._get("floating_base")),
            joint_friction=bool(self._get("joint_friction")), armature=bool(self._get("armature")),
            sensor=sensor, command_delay=float(self._get("command_delay")),
            measurement_delay=float(self._get("measurement_delay")),
            command_timeout=float(self._get("command_timeout")),
            limp_damping=float(self._get("limp_damping")),
            initial_position=None if initial is None or len(initial) == 0 else np.array(initial, dtype=float),
            integrator=str(self._get("integrator")))

    def _publish_truth(self) -> None:
        self._truth_pub.publish(to_truth_msg(*self.sim.true_parameters()))

    # ------------------------------------------------------------------------------ callbacks
    def _on_command(self, msg: MotorCommand) -> None:
        try:
            with self._lock:
                self.sim.command(msg.name, msg.position, msg.velocity, msg.effort, msg.kp, msg.kd)
        except SysIdError as exc:
            self.rejected += 1
            self.get_logger().warning(f"command rejected ({self.rejected} so far): {exc}",
                                      throttle_duration_sec=2.0)

    def _run(self) -> None:
        """Stepping loop: as many physics steps as the real-time factor makes due, then sleep
        until the next one (no sleep at factor 0)."""
        wall0, steps0 = time.monotonic(), self.sim.step_count
        last_report = wall0
        try:
            while not self._stop.is_set() and self.context.ok():
                now = time.monotonic()
                if self.rtf > 0:
                    due = int((now - wall0) * self.rtf * self.rate) - (self.sim.step_count - steps0)
                    if due <= 0:
                        time.sleep(min(TICK, -due / (self.rtf * self.rate) + 1.0 / (self.rtf * self.rate)))
                        continue
                    due = min(due, max(1, int(0.05 * self.rtf * self.rate)))  # catch up gradually
                else:
                    due = 50
                for _ in range(due):
                    self._step_once()
                    if self.duration > 0 and self.sim.time >= self.duration:
                        self.get_logger().info(f"simulated {self.duration:g} s: stepping stopped")
                        return
                if now - last_report > 5.0:
                    self.get_logger().info(
                        f"t = {self.sim.time:.1f} s, real-time factor "
                        f"{(self.sim.step_count - steps0) / self.rate / max(now - wall0, 1e-9):.2f}, "
                        f"mode {self.sim.mode}, {self.sim.counters['commands']} commands")
                    last_report = now
        except Exception as exc:  # a crash of the physics must not go unnoticed
            if self.context.ok():
                self.get_logger().fatal(f"simulation stopped: {exc}")
                raise

    def destroy_node(self):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        return super().destroy_node()

    def _step_once(self) -> None:
        k = self.sim.step_count
        with self._lock:
            sample = self.sim.step()
        if k % self.clock_every == 0:
            sec, nsec = _split(self.sim.time)
            self._clock_msg.clock.sec, self._clock_msg.clock.nanosec = sec, nsec
            self._clock_pub.publish(self._clock_msg)
        if sample is not None and k % self.publish_every == 0:
            msg = self._joint_msg
            msg.header.stamp.sec, msg.header.stamp.nanosec = _split(sample.t)
            msg.position = sample.q.tolist()
            msg.velocity = sample.dq.tolist()
            msg.effort = sample.tau.tolist()
            self._state_pub.publish(msg)


def _split(t: float) -> tuple[int, int]:
    ns = round(t * 1e9)
    return ns // 1_000_000_000, ns % 1_000_000_000


def main(args=None) -> None:
    spin(MujocoSimNode, SingleThreadedExecutor, args=args)


if __name__ == "__main__":
    main()
