"""The ``damiao_bridge`` lifecycle node in process (private rclpy context and DDS domain):
lifecycle transitions over the real ChangeState service with ``use_emulator`` (the emulated bus
built by the node), a fault reported in diagnostics and recovered from, a bad configuration
refused with the node still up, and topic names set by remapping."""

from __future__ import annotations

import os

import pytest
from support.damiao_rig import CONFIG, N_JOINTS, RATE, Listener, wait_until

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from lifecycle_msgs.msg import State, Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from sysid_ros.hardware.bridge_config import load_parameters  # noqa: E402
from sysid_ros.hardware.codec import MotorState  # noqa: E402
from sysid_ros.nodes.damiao_bridge import DamiaoBridgeNode  # noqa: E402

pytestmark = pytest.mark.ros


def node_parameters(**overrides) -> list[Parameter]:
    """The YAM parameters file as ROS parameters (the ``/**`` wiring and the bridge's section),
    with overrides."""
    params = load_parameters(CONFIG, node_name="damiao_bridge")
    params.update(overrides)
    return [Parameter(k, value=v) for k, v in params.items()]


def test_node_reports_a_fault_in_diagnostics_and_recovers_through_the_lifecycle(ros_domain_id):
    """Emulated motors on the node's bus (use_emulator, lockstep physics) in the bridge's own
    process, reached through the node's emulator handle (fault injection, motor states)."""
    ros = Listener(ros_domain_id)
    bridge = DamiaoBridgeNode(context=ros.context, parameter_overrides=node_parameters(
        use_emulator=True, rate=RATE, max_missed_replies=50, diagnostics_rate=20.0))
    ros.add(bridge)
    change = ros.node.create_client(ChangeState, "/damiao_bridge/change_state")
    get_state = ros.node.create_client(GetState, "/damiao_bridge/get_state")
    try:
        assert ros.call(get_state, GetState.Request()).current_state.label == "unconfigured"
        assert bridge.emulated is None  # nothing emulated before configure
        for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            assert ros.call(change, ChangeState.Request(transition=Transition(id=transition))).success
        emulator = bridge.emulated
        assert wait_until(lambda: emulator.motor_states() == [MotorState.ENABLED] * N_JOINTS)
        assert wait_until(lambda: len(ros.states) > 20)
        emulator.inject_overtemperature("joint5", "mosfet")
        assert wait_until(lambda: (s := ros.status("damiao_bridge: control loop")) is not None
                          and s.message.startswith("ALL MOTORS DISABLED"))
        loop = ros.status("damiao_bridge: control loop")
        assert loop.level == DiagnosticStatus.ERROR
        assert "motor fault on joint5: motor 0x05 reports 0xB MOSFET over-temperature" in loop.message
        assert wait_until(lambda: ros.status("damiao_bridge: joint5").level == DiagnosticStatus.ERROR)
        joint5 = ros.status("damiao_bridge: joint5")
        values = {kv.key: kv.value for kv in joint5.values}
        assert "MOSFET over-temperature" in joint5.message and int(values["mosfet_temperature_C"]) >= 120
        assert ros.status("damiao_bridge: joint1").level == DiagnosticStatus.OK
        assert wait_until(lambda: emulator.motor_states() == [MotorState.DISABLED] * 4
                          + [MotorState.MOSFET_OVER_TEMP, MotorState.DISABLED])
        # the trip moves the node out of active: no more joint states while no motor is enabled
        assert wait_until(lambda: ros.call(get_state, GetState.Request()).current_state.label == "inactive")
        # every state the loop produced reaches the listener (from the loop process, through the
        # node, over DDS), and none comes after the trip
        count = bridge.bridge.status().cycles
        assert wait_until(lambda: len(ros.states) == count), (len(ros.states), count)
        activate = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_ACTIVATE))
        assert not ros.call(change, activate).success  # the fault is latched
        assert bridge.bridge.status().cycles == count and len(ros.states) == count
        assert emulator.motor_states()[:4] == [MotorState.DISABLED] * 4
        # acknowledge: refused while joint5 is still hot, then cleared once it has cooled down
        clear = ros.node.create_client(Trigger, "/damiao_bridge/clear_fault")
        reply = ros.call(clear, Trigger.Request())
        assert not reply.success and "joint5 0xB MOSFET over-temperature" in reply.message, reply.message
        emulator.cool_down("joint5")
        reply = ros.call(clear, Trigger.Request())
        assert reply.success and "joint5 0x0" in reply.message, reply.message
        assert ros.call(change, activate).success
        assert wait_until(lambda: emulator.motor_states() == [MotorState.ENABLED] * N_JOINTS)
        assert wait_until(lambda: ros.status("damiao_bridge: control loop").level == DiagnosticStatus.OK)
        deactivate = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_DEACTIVATE))
        assert ros.call(change, deactivate).success
        assert emulator.motor_states() == [MotorState.DISABLED] * N_JOINTS
        worker = bridge.bridge.pid
        cleanup = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CLEANUP))
        assert ros.call(change, cleanup).success
        # the node ended the bridge's process (and with it the emulated bus)
        assert bridge.emulated is None and not emulator.running
        assert not os.path.exists(f"/proc/{worker}")  # ended and reaped
    finally:
        ros.executor.remove_node(bridge)
        bridge.destroy_node()
        ros.close()


def test_node_refuses_a_bad_configuration_and_stays_up(ros_domain_id):
    params = {p.name: p.value for p in node_parameters(use_emulator=True, rate=500)}
    params["joints.can_ids"] = [1, 2, 3]  # six joints
    ros = Listener(ros_domain_id)
    node = DamiaoBridgeNode(context=ros.context,
                            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    ros.add(node)
    get_state = ros.node.create_client(GetState, "/damiao_bridge/get_state")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        state = ros.call(get_state, GetState.Request()).current_state
        assert state.id == State.PRIMARY_STATE_UNCONFIGURED  # still up, can be configured again
        assert node.bridge is None and node.emulated is None
    finally:
        ros.executor.remove_node(node)
        node.destroy_node()
        ros.close()


def test_topic_names_come_from_remapping(ros_domain_id):
    """Relative names: ``joint_states``, ``diagnostics`` and ``motor_command`` follow the remapping
    rules given to the node; ``~/replay_done`` stays under the node's name."""
    ros = Listener(ros_domain_id)
    remap = ("joint_states:=/arm/joint_states", "diagnostics:=/arm/diagnostics",
             "motor_command:=/arm/command")
    node = DamiaoBridgeNode(context=ros.context,
                            parameter_overrides=node_parameters(use_emulator=True, rate=RATE),
                            cli_args=["--ros-args", *(a for rule in remap for a in ("-r", rule))])
    def published() -> set[str]:
        return {name for name, _ in node.get_publisher_names_and_types_by_node("damiao_bridge", "/")}

    def subscribed() -> set[str]:
        return {name for name, _ in node.get_subscriber_names_and_types_by_node("damiao_bridge", "/")}

    try:  # the ROS graph is updated asynchronously: bounded waits for the names to show
        assert wait_until(lambda: {"/arm/joint_states", "/arm/diagnostics", "/damiao_bridge/replay_done"}
                          <= published()), published()
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert wait_until(lambda: "/arm/command" in subscribed()), subscribed()
        assert "/motor_command" not in subscribed()
        assert wait_until(lambda: "/sim/true_parameters" in published()), published()  # use_emulator's truth
    finally:
        node.destroy_node()
        ros.close()


def test_command_line_overrides_win_over_the_shipped_file(ros_domain_id):
    """rcl puts ``-p`` overrides into the file's ``/**`` section: with the shared wiring in a
    ``/**`` section placed last, they still override the bridge's own section."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id,
               args=["--ros-args", "--params-file", str(CONFIG), "-p", "rate:=500",
                     "-p", "interface:=virtual", "-p", "joints.kp:=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]"])
    node = DamiaoBridgeNode(context=context)
    try:
        assert node.get_parameter("rate").value == 500 and node.get_parameter("interface").value == "virtual"
        assert list(node.get_parameter("joints.kp").value) == [1.0] * N_JOINTS
        assert list(node.get_parameter("joints.names").value) == [f"joint{i}" for i in range(1, 7)]  # /**
        assert node.get_parameter("joints.position_max").value[0] == pytest.approx(3.05433)  # its own section
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
