"""Identify the arm on real Damiao motors: bridge + trajectory publisher + online estimator + recording.

    ros2 launch sysid_ros hardware_identify.launch.py                       # real motors (config's bus)
    ros2 launch sysid_ros hardware_identify.launch.py use_emulator:=true    # no hardware
    ros2 launch sysid_ros hardware_identify.launch.py config:=my_arm_damiao.yaml record:=false

The graph: trajectory_publisher → /motor_command → damiao_bridge → CAN → motors → damiao_bridge →
/joint_states → estimator → /estimator/estimate; the recorder writes a rosbag2 bag of the run
(`ros2 bag record /joint_states /motor_command` does the same on a full ROS install).

``use_emulator:=true`` swaps in emulated motors (MuJoCo-driven, see ``damiao_emulator``):

* default: the bridge starts the emulator **in its own process** on a python-can ``virtual``
  channel (``virtual`` connects buses inside one process only) — works anywhere, no CAN device;
* ``emulator_node:=true``: the ``damiao_emulator`` node runs as its own process on a bus both
  processes can reach, ``can_interface``/``can_channel`` (default ``socketcan``/``vcan0``: create
  it with ``sudo ip link add dev vcan0 type vcan && sudo ip link set up vcan0``).

The bridge is a lifecycle node; ``autostart:=true`` (default) configures and activates it at
start, ``autostart:=false`` leaves that to ``ros2 lifecycle set /damiao_bridge configure`` and
``activate`` (motors are enabled on activate, disabled on deactivate, shutdown and Ctrl-C).
"""

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def _config(name: str) -> PathJoinSubstitution:
    return PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", name])


def _all(*conditions) -> IfCondition:
    """True when every ``(launch argument, expected 'true'/'false')`` pair holds."""
    terms = []
    for arg, value in conditions:
        terms += ["'", LaunchConfiguration(arg), f"'.lower() == '{value}'", " and "]
    return IfCondition(PythonExpression(terms[:-1]))


def generate_launch_description() -> LaunchDescription:
    args = [
        DeclareLaunchArgument("config", default_value=_config("yam_damiao.yaml"),
                              description="bridge parameters: bus, loop, fail-safe timeouts, joints"),
        DeclareLaunchArgument("use_emulator", default_value="false",
                              description="true: emulated motors instead of the real ones"),
        DeclareLaunchArgument("emulator_node", default_value="false",
                              description="with use_emulator: the damiao_emulator node on can_interface/"
                                          "can_channel instead of the bridge's in-process emulator"),
        DeclareLaunchArgument("can_interface", default_value="socketcan",
                              description="python-can interface shared by bridge and emulator node"),
        DeclareLaunchArgument("can_channel", default_value="vcan0",
                              description="python-can channel shared by bridge and emulator node"),
        DeclareLaunchArgument("emulator_config", default_value=_config("yam_damiao_emulator.yaml"),
                              description="damiao_emulator parameters (emulator_node:=true)"),
        DeclareLaunchArgument("payload", default_value="",
                              description="emulated payload 'body=link_6,mass=1.0,com=0,0,0.05' ('' = none)"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="configure and activate the bridge at start"),
        DeclareLaunchArgument("model_path", default_value="",
                              description="MJCF of the robot ('' = the package's default robot)"),
        DeclareLaunchArgument("trajectory", default_value="true",
                              description="run the trajectory publisher (false: command from elsewhere, or "
                                          "set replay_file in the bridge config)"),
        DeclareLaunchArgument("trajectory_config", default_value=_config("trajectory_publisher.yaml"),
                              description="trajectory_publisher parameters"),
        DeclareLaunchArgument("estimator_config", default_value=_config("estimator.yaml"),
                              description="estimator parameters (method, target, ...)"),
        DeclareLaunchArgument("record", default_value="true", description="record a rosbag2 bag of the run"),
        DeclareLaunchArgument("recorder_config", default_value=_config("recorder.yaml"),
                              description="recorder parameters (output folder, topics, storage)"),
    ]
    model = {"model_path": LaunchConfiguration("model_path")}
    common = dict(package="sysid_ros", output="screen", emulate_tty=True)
    bridge_base = [LaunchConfiguration("config"), {"autostart": LaunchConfiguration("autostart")}]
    nodes = [
        # real motors: the bus of the config file
        Node(executable="damiao_bridge", name="damiao_bridge", parameters=bridge_base,
             condition=_all(("use_emulator", "false")), **common),
        # emulated motors inside the bridge's process, on a virtual channel
        Node(executable="damiao_bridge", name="damiao_bridge",
             parameters=[*bridge_base, model, {"interface": "virtual", "emulator": True,
                                               "emulator_payload": LaunchConfiguration("payload")}],
             condition=_all(("use_emulator", "true"), ("emulator_node", "false")), **common),
        # emulated motors as their own node on a bus shared by both processes
        Node(executable="damiao_bridge", name="damiao_bridge",
             parameters=[*bridge_base, {"interface": LaunchConfiguration("can_interface"),
                                        "channel": LaunchConfiguration("can_channel"), "emulator": False}],
             condition=_all(("use_emulator", "true"), ("emulator_node", "true")), **common),
        Node(executable="damiao_emulator", name="damiao_emulator",
             parameters=[LaunchConfiguration("emulator_config"), model,
                         {"interface": LaunchConfiguration("can_interface"),
                          "channel": LaunchConfiguration("can_channel"),
                          "payload": LaunchConfiguration("payload")}],
             condition=_all(("use_emulator", "true"), ("emulator_node", "true")), **common),
        Node(executable="trajectory_publisher", name="trajectory_publisher",
             parameters=[LaunchConfiguration("trajectory_config"), model],
             condition=IfCondition(LaunchConfiguration("trajectory")), **common),
        Node(executable="estimator", name="estimator",
             parameters=[LaunchConfiguration("estimator_config"), model], **common),
        Node(executable="recorder", name="recorder", parameters=[LaunchConfiguration("recorder_config")],
             condition=IfCondition(LaunchConfiguration("record")), **common),
    ]
    return LaunchDescription([*args, *nodes])
