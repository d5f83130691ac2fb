"""Identify the arm on real Damiao motors: bridge + trajectory publisher + online estimator + recording.

    ros2 launch sysid_ros hardware_identify.launch.py                       # real motors (config's bus)
    ros2 launch sysid_ros hardware_identify.launch.py use_emulator:=true    # no hardware
    ros2 launch sysid_ros hardware_identify.launch.py config:=my_arm_damiao.yaml record:=false
    ros2 launch sysid_ros hardware_identify.launch.py use_emulator:=true \
        payload:="body=link_6,mass=0.8,com=0.02,-0.01,0.06" target:=link_6 prior:=uninformative

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
    args = [DeclareLaunchArgument(name, default_value=default, description=description)
            for name, default, description in (
                ("config", _config("yam_damiao.yaml"), "bridge parameters: bus, loop, fail-safe, joints"),
                ("use_emulator", "false", "true: emulated motors instead of the real ones"),
                ("emulator_node", "false", "with use_emulator: the damiao_emulator node on can_interface/"
                                           "can_channel instead of the bridge's in-process emulator"),
                ("can_interface", "socketcan", "python-can interface shared by bridge and emulator node"),
                ("can_channel", "vcan0", "python-can channel shared by bridge and emulator node"),
                ("emulator_config", _config("yam_damiao_emulator.yaml"), "damiao_emulator parameters"),
                ("payload", "", "emulated payload 'body=link_6,mass=1.0,com=0,0,0.05' ('' = none)"),
                ("autostart", "true", "configure and activate the bridge at start"),
                ("rate", "700.0", "[Hz] bridge loop = joint-state rate = estimator sample rate"),
                ("model_path", "", "MJCF of the robot ('' = the package's default robot)"),
                ("trajectory", "true", "run the trajectory publisher (false: replay_file in the bridge "
                                       "config, or commands from elsewhere)"),
                ("trajectory_config", _config("trajectory_publisher.yaml"),
                 "trajectory publisher parameters"),
                ("excitation_time", "30.0", "[s] of excitation"),
                ("coefficients_file", "", "excitation coefficients JSON, e.g. the shipped "
                                          "config/excitation/yam_damiao_optimized.json ('' = random/seed)"),
                ("estimator_config", _config("estimator.yaml"), "estimator parameters"),
                ("target", "arm", "estimator target: 'arm' or the body carrying an unknown payload"),
                ("method", "rls_logdet", "rls | rls_logdet | momentum"),
                ("prior", "nominal", "estimator prior: nominal | uninformative | a result.json"),
                ("record", "true", "record a rosbag2 bag of the run"),
                ("recorder_config", _config("recorder.yaml"), "recorder parameters (topics, storage)"),
                ("bag", "", "bag directory ('' = sysid_bags/run_<time>)"),
            )]
    model = {"model_path": LaunchConfiguration("model_path")}
    common = dict(package="sysid_ros", output="screen", emulate_tty=True)
    bridge_base = [LaunchConfiguration("config"), {"autostart": LaunchConfiguration("autostart"),
                                                   "rate": LaunchConfiguration("rate")}]
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
             parameters=[LaunchConfiguration("trajectory_config"), model,
                         {"excitation_time": LaunchConfiguration("excitation_time"),
                          "coefficients_file": LaunchConfiguration("coefficients_file")}],
             condition=IfCondition(LaunchConfiguration("trajectory")), **common),
        # reliable deep-queue input: the bridge publishes RELIABLE, no joint state is lost on the way
        Node(executable="estimator", name="estimator",
             parameters=[LaunchConfiguration("estimator_config"), model,
                         {"sample_rate": LaunchConfiguration("rate"), "target": LaunchConfiguration("target"),
                          "method": LaunchConfiguration("method"), "prior": LaunchConfiguration("prior"),
                          "reliable_input": True}], **common),
        Node(executable="recorder", name="recorder",
             parameters=[LaunchConfiguration("recorder_config"), {"output": LaunchConfiguration("bag")}],
             condition=IfCondition(LaunchConfiguration("record")), **common),
    ]
    return LaunchDescription([*args, *nodes])
