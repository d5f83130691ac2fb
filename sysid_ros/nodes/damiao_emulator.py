"""Node ``damiao_emulator``: emulated Damiao motors on a CAN bus, shafts driven by MuJoCo.

A thin ROS facade over :class:`sysid_ros.hardware.emulator.MotorEmulator`. The emulator answers
frames on the configured python-can bus from its own thread; the node adds:

* ``/sim/true_parameters`` (``sysid_ros/ParameterEstimate``, latched): the emulated robot's true
  parameters (the payload merged into its body, plus ``payload.*``), like ``mujoco_sim``;
* ``~/joint_states`` (``sensor_msgs/JointState``): the TRUE joint state (position, velocity,
  applied joint torque) at ``state_rate`` — ground truth next to what the bridge measures;
* ``~/fault`` (``std_msgs/String``): fault injection, one command per message::

      overtemp JOINT [mosfet|coil]   cool JOINT          state JOINT CODE (e.g. 0xE)
      comm_loss JOINT                restore JOINT       drop JOINT COUNT
      drop_fraction JOINT FRACTION   bus_off             clear_bus_off        clear

  (JOINT = joint name or CAN ID). A bad command is logged and ignored.

python-can's ``virtual`` bus only connects buses inside one process, so across processes use a
real bus: ``interface: socketcan``, ``channel: vcan0`` (``ip link add dev vcan0 type vcan``), or
``udp_multicast`` (needs ``msgpack``). In-process (the bridge's ``emulator: true``), the bridge
constructs the emulator itself and this node is not needed.
"""

from __future__ import annotations

import math

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.hardware.codec import MotorState
from sysid_ros.hardware.emulator import EmulatorJoint, MotorEmulator
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
PARAMETERS = (
    ("interface", "virtual", "python-can interface (virtual = this process only; socketcan for vcan0)"),
    ("channel", "damiao", "python-can channel"),
    ("model_path", "", "MJCF driven by the emulator ('' = the package's default robot)"),
    ("initial_pose", "home", "keyframe of the MJCF the arm starts in ('' = qpos0)"),
    ("payload", "", "payload welded to a body: body=NAME,mass=KG,com=X,Y,Z[,inertia=...] ('' = none)"),
    ("physics_rate", 1000.0, "[Hz] physics step rate"),
    ("clock", "realtime", "realtime (physics follows the wall clock) | lockstep (a period per round)"),
    ("lockstep_period", 0.0, "[s] physics per command round in lockstep (0 = one physics step)"),
    ("timeout_registers", 0, "initial TIMEOUT register of every motor (50 us units, 0 = off, as shipped)"),
    ("firmware", "v13", "v13 (low 8 ID bits compared, wrong mode misread) | legacy (exact IDs)"),
    ("state_rate", 100.0, "[Hz] ~/joint_states (true state) rate"),
    ("truth_topic", "/sim/true_parameters", "latched true parameters (ParameterEstimate)"),
)
JOINT_PARAMETERS = (
    ("joints.names", ["joint1", "joint2", "joint3", "joint4", "joint5", "joint6"], "MJCF joint names"),
    ("joints.motors", ["DM4340", "DM4340", "DM4340", "DM4310", "DM4310", "DM4310"], "Damiao model per joint"),
    ("joints.can_ids", [1, 2, 3, 4, 5, 6], "ESC_ID per motor"),
    ("joints.master_ids", [17, 18, 19, 20, 21, 22], "MST_ID per motor (convention can_id + 0x10)"),
    ("joints.directions", [1, 1, 1, 1, 1, 1], "+1/-1 between motor and joint"),
    ("joints.position_offsets", [0.0] * 6, "[rad] joint position at motor zero"),
    ("joints.gear_ratios", [1.0] * 6, "motor turns per joint turn"),
)


def parse_joints(values: dict) -> list[EmulatorJoint]:
    """Per-joint parallel arrays (``joints.*``) → :class:`EmulatorJoint` list; clear errors."""
    names = list(values["joints.names"])
    for key, _, _ in JOINT_PARAMETERS:
        if len(values[key]) != len(names):
            raise SysIdError(f"{key} has {len(values[key])} entries, expected {len(names)} (one per joint "
                             f"{names})")
    return [EmulatorJoint(n, m, int(c), int(mi), int(d), float(o), float(g)) for n, m, c, mi, d, o, g in zip(
        names, values["joints.motors"], values["joints.can_ids"], values["joints.master_ids"],
        values["joints.directions"], values["joints.position_offsets"], values["joints.gear_ratios"],
        strict=True)]


class DamiaoEmulatorNode(Node):
    """Thin ROS facade over :class:`MotorEmulator` (see the module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("damiao_emulator", **kwargs)
        for name, default, description in (*PARAMETERS, *JOINT_PARAMETERS):
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        p = {name: self.get_parameter(name).value for name, _, _ in (*PARAMETERS, *JOINT_PARAMETERS)}
        payload = Payload.parse(p["payload"]) if p["payload"] else None
        self.emulator = MotorEmulator(
            parse_joints(p), channel=p["channel"], interface=p["interface"],
            model_path=p["model_path"] or None, initial_pose=p["initial_pose"] or None, payload=payload,
            physics_rate=float(p["physics_rate"]),
            clock=p["clock"], lockstep_period=float(p["lockstep_period"]) or None,
            timeout_registers=int(p["timeout_registers"]), firmware=p["firmware"])
        self._truth_pub = self.create_publisher(ParameterEstimate, p["truth_topic"], LATCHED)
        self._state_pub = self.create_publisher(JointState, "~/joint_states", qos_profile_sensor_data)
        self.create_subscription(String, "~/fault", self._on_fault, 10)
        self.create_timer(1.0 / float(p["state_rate"]), self._publish_state)
        self.emulator.start()
        ids = ", ".join(f"{j.name}=0x{j.can_id:X}/0x{j.master_id:X}" for j in self.emulator.joints)
        self.get_logger().info(f"emulating {len(self.emulator.motors)} Damiao motors on {p['interface']}:"
                               f"{p['channel']} ({ids}), {p['clock']} clock at {p['physics_rate']:g} Hz")
        # last: the latched truth is the sign that the emulator answers (a test may stop it then)
        self._publish_truth()

    def _publish_truth(self) -> None:
        names, values = self.emulator.true_parameters()
        msg = ParameterEstimate()
        msg.method, msg.target = "truth", "arm"
        msg.names = list(names)
        msg.values = [float(v) for v in values]
        msg.std_dev = [0.0] * len(values)
        msg.rank = len(values)
        msg.condition_number = msg.residual_rms = msg.divergence_to_prior = math.nan
        msg.physically_consistent = True
        msg.divergence_to_truth = 0.0
        self._truth_pub.publish(msg)

    def _publish_state(self) -> None:
        emu = self.emulator
        if emu.error is not None:
            self.get_logger().error(f"the emulator thread stopped: {emu.error!r}", throttle_duration_sec=5.0)
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(emu.joint_names)
        msg.position = [float(x) for x in emu.joint_positions()]
        msg.velocity = [float(x) for x in emu.joint_velocities()]
        msg.effort = [float(x) for x in emu.joint_torques()]
        self._state_pub.publish(msg)

    def _on_fault(self, msg: String) -> None:
        try:
            text = apply_fault(self.emulator, msg.data)
        except (SysIdError, ValueError, IndexError) as exc:
            self.get_logger().error(f"bad fault command {msg.data!r}: {exc}")
            return
        self.get_logger().warning(f"fault injected: {text}")

    def destroy_node(self) -> None:
        self.emulator.stop()
        super().destroy_node()


def apply_fault(emulator: MotorEmulator, command: str) -> str:
    """Apply one ``~/fault`` command (see the module docstring); returns what was done."""
    words = command.split()
    if not words:
        raise ValueError("empty command")
    verb, args = words[0], words[1:]

    def key(i: int = 0) -> str | int:
        word = args[i]
        return int(word, 0) if word[:1].isdigit() else word

    if verb == "overtemp":
        emulator.inject_overtemperature(key(), args[1] if len(args) > 1 else "mosfet")
    elif verb == "cool":
        emulator.cool_down(key())
    elif verb == "state":
        emulator.inject_state(key(), MotorState(int(args[1], 0)))
    elif verb == "comm_loss":
        emulator.inject_comm_loss(key())
    elif verb == "restore":
        emulator.restore_comm(key())
    elif verb == "drop":
        emulator.drop_replies(key(), int(args[1]))
    elif verb == "drop_fraction":
        emulator.drop_fraction(key(), float(args[1]))
    elif verb == "bus_off":
        emulator.inject_bus_off()
    elif verb == "clear_bus_off":
        emulator.clear_bus_off()
    elif verb == "clear":
        emulator.clear_faults()
    else:
        raise ValueError(f"unknown fault {verb!r}; expected overtemp, cool, state, comm_loss, restore, drop, "
                         "drop_fraction, bus_off, clear_bus_off or clear")
    return command.strip()


def main(args=None) -> None:
    spin(DamiaoEmulatorNode, SingleThreadedExecutor, args)


if __name__ == "__main__":
    main()
