"""Node ``damiao_emulator``: emulated Damiao motors on a CAN bus shared with other processes,
shafts driven by MuJoCo.

A thin ROS facade over :class:`sysid_ros.hardware.emulator.MotorEmulator`. The emulator answers
frames on the configured python-can bus (``interface``, ``channel``) from its own thread; the
joints' wiring is the bridge's (``joints.*`` of ``config/yam_damiao.yaml``, in its ``/**``
section), the emulated robot the ``emulator.*`` group shared with the bridge's ``use_emulator``.
The node adds (relative names: remap them in a launch file or with ``--ros-args -r``):

* ``sim/true_parameters`` (``sysid_ros/ParameterEstimate``, latched): the emulated robot's true
  parameters (the payload merged into its body, plus ``payload.*``), like ``mujoco_sim``;
* ``~/joint_states`` (``sensor_msgs/JointState``): the TRUE joint state (position, velocity,
  applied joint torque) at ``state_rate`` — ground truth next to what the bridge measures;
* ``~/fault`` (``std_msgs/String``): fault injection, one command per message::

      overtemp JOINT [mosfet|coil]   cool JOINT          state JOINT CODE (e.g. 0xE)
      comm_loss JOINT                restore JOINT       drop JOINT COUNT
      drop_fraction JOINT FRACTION   bus_off             clear_bus_off        clear

  (JOINT = joint name or CAN ID). A bad command is logged and ignored.

python-can's ``virtual`` bus only connects buses inside one process, so this node is for a bus
shared between processes: ``interface: socketcan``, ``channel: vcan0`` (``ip link add dev vcan0
type vcan``), or ``udp_multicast`` (needs ``msgpack``). Without hardware on one machine the
bridge's own ``use_emulator: true`` is simpler (an emulated bus inside the bridge's process).
"""

from __future__ import annotations

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.sim.synthetic import Payload
from sysid_ros.hardware.codec import MotorState
from sysid_ros.hardware.emulated_bus import EMULATOR_PARAMETERS, EmulatorOptions
from sysid_ros.hardware.emulator import MotorEmulator
from sysid_ros.hardware.wiring import WIRING_PARAMETERS, wiring_from_parameters
from sysid_ros.msg import ParameterEstimate
from sysid_ros.nodes import spin
from sysid_ros.nodes.conversions import to_truth_msg
from sysid_ros.nodes.parameters import declare_config_parameters, parameter_value
from sysid_ros.nodes.qos import LATCHED

#: ``(name, default, description)``: the node's own parameters, then the ``emulator.*`` group
#: (whose clock defaults to the wall clock here: the host is another process)
PARAMETERS = (
    ("interface", "virtual", "python-can interface (virtual = this process only; socketcan for vcan0)"),
    ("channel", "damiao", "python-can channel"),
    ("lockstep_period", 0.0, "[s] physics per command round, emulator.clock lockstep (0 = one physics step)"),
    ("state_rate", 100.0, "[Hz] ~/joint_states (true state) rate"),
    *((f"emulator.{name}", "realtime" if name == "clock" else default, description)
      for name, default, description in EMULATOR_PARAMETERS),
)


class DamiaoEmulatorNode(Node):
    """Thin ROS facade over :class:`MotorEmulator` (see the module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("damiao_emulator", **kwargs)
        declare_config_parameters(self, PARAMETERS)  # numbers checked by EmulatorOptions, 1/0 switches
        for w in WIRING_PARAMETERS:
            kind = Parameter.Type.STRING_ARRAY if w.kind is str else None
            descriptor = ParameterDescriptor(description=w.description, dynamic_typing=kind is None)
            self.declare_parameter(f"joints.{w.key}", kind, descriptor)
        p = {name: parameter_value(self, name) for name, _, _ in PARAMETERS}
        for w in WIRING_PARAMETERS:
            value = self.get_parameter(f"joints.{w.key}").value
            if value is not None:
                p[f"joints.{w.key}"] = list(value)
        options = EmulatorOptions.from_parameters(p)
        payload = Payload.parse(options.payload) if options.payload else None
        self.emulator = MotorEmulator(
            wiring_from_parameters(p), channel=p["channel"], interface=p["interface"],
            model_path=options.model_path or None, initial_pose=options.initial_pose or None, payload=payload,
            physics_rate=options.physics_rate, clock=options.clock,
            lockstep_period=float(p["lockstep_period"]) or None, timeout_registers=options.timeout_registers,
            firmware=options.firmware, realtime_priority=options.realtime_priority)
        self._truth_pub = self.create_publisher(ParameterEstimate, "sim/true_parameters", LATCHED)
        self._state_pub = self.create_publisher(JointState, "~/joint_states", qos_profile_sensor_data)
        self.create_subscription(String, "~/fault", self._on_fault, 10)
        self.create_timer(1.0 / float(p["state_rate"]), self._publish_state)
        self.emulator.start()
        ids = ", ".join(f"{j.name}=0x{j.can_id:X}/0x{j.master_id:X}" for j in self.emulator.joints)
        self.get_logger().info(f"emulating {len(self.emulator.motors)} Damiao motors on "
                               f"{p['interface']}:{p['channel']} ({ids}), {options.clock} clock at "
                               f"{options.physics_rate:g} Hz")
        # last: the latched truth is the sign that the emulator answers (a test may stop it then)
        self._publish_truth()

    def _publish_truth(self) -> None:
        self._truth_pub.publish(to_truth_msg(*self.emulator.true_parameters()))

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
