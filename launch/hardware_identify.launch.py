"""Identify the arm on real Damiao motors: bridge + trajectory publisher + online estimator + recording.

    ros2 launch sysid_ros hardware_identify.launch.py                       # real motors (config's bus)
    ros2 launch sysid_ros hardware_identify.launch.py use_emulator:=true    # no hardware
    ros2 launch sysid_ros hardware_identify.launch.py config:=my_arm_damiao.yaml record:=false
    ros2 launch sysid_ros hardware_identify.launch.py use_emulator:=true \\
        payload:="body=link_6,mass=0.8,com=0.02,-0.01,0.06" target:=link_6 prior:=uninformative

The graph: trajectory_publisher → /motor_command → damiao_bridge → CAN → motors → damiao_bridge →
/joint_states → estimator → /estimator/estimate; the recorder writes a rosbag2 bag of the run
(`ros2 bag record joint_states motor_command` does the same on a full ROS install). Every name is
relative (``/joint_states`` ... in the root namespace): a ``PushRosNamespace`` around this file's
``IncludeLaunchDescription`` moves the whole graph.

One bridge node either way: ``use_emulator:=true`` makes it build an emulated bus in its own
process (motors emulated from the firmware's behaviour, shafts driven by MuJoCo, on a private
python-can ``virtual`` channel; parameters ``emulator.*`` of the config file, ``payload`` here)
instead of opening the config's bus. For emulated motors in another process on a shared bus
(``vcan0``), run ``ros2 run sysid_ros damiao_emulator --ros-args --params-file
config/yam_damiao.yaml`` next to this launch with ``channel:=vcan0``.

The bridge is a lifecycle node; ``autostart:=true`` (default) configures and activates it at
start, ``autostart:=false`` leaves that to ``ros2 lifecycle set /damiao_bridge configure`` and
``activate`` (motors are enabled on activate, disabled on deactivate, shutdown and Ctrl-C).

Checked before any node starts: switches take exactly what launch's IfCondition takes
(true/false/1/0, any case), ``bag`` must not exist yet, ``model_path`` must be a file. The bridge,
the estimator and (when started) the trajectory publisher and recorder are required: when one ends,
one line names it and the launch stops (the bridge disables the motors, the recorder finishes its bag).
The excitation starts only once the estimator (and the recorder) are connected to the joint states
(trajectory_publisher ``start_after``): on a busy host a node can take tens of seconds to start.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from sysid_ros.core.data.effort_timing import DAMIAO_REPLY
from sysid_ros.nodes.launch_checks import model_file, new_bag, required, switch

SWITCHES = ("use_emulator", "autostart", "trajectory", "record")


def _config(name: str) -> PathJoinSubstitution:
    return PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", name])


def generate_launch_description() -> LaunchDescription:
    args = [DeclareLaunchArgument(name, default_value=default, description=description)
            for name, default, description in (
                ("config", _config("yam_damiao.yaml"), "bridge parameters: bus, loop, fail-safe, joints, "
                                                       "emulator"),
                ("use_emulator", "false", "true: emulated motors in the bridge's process instead of the "
                                          "config's bus (no hardware)"),
                ("channel", "", "python-can channel overriding the config's ('' = the config's), e.g. "
                                "vcan0 shared with a damiao_emulator node"),
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
    return LaunchDescription([*args, OpaqueFunction(function=_graph)])


def _graph(context: LaunchContext) -> list[Node]:
    """The nodes, once the arguments are checked (an error here starts no node)."""
    arg = LaunchConfiguration
    on = {name: switch(name, arg(name).perform(context)) for name in SWITCHES}
    model_file("model_path", arg("model_path").perform(context))
    if on["record"]:
        new_bag("bag", arg("bag").perform(context))
    model = {"model_path": arg("model_path")}
    common = dict(package="sysid_ros", output="screen", emulate_tty=True)
    # the one bridge node: the config file, then the arguments (``channel`` only if given)
    overrides = {"autostart": on["autostart"], "rate": arg("rate"), "use_emulator": on["use_emulator"],
                 "emulator.model_path": arg("model_path"), "emulator.payload": arg("payload")}
    if arg("channel").perform(context):
        overrides["channel"] = arg("channel")
    nodes = [Node(executable="damiao_bridge", name="damiao_bridge", parameters=[arg("config"), overrides],
                  on_exit=required("damiao_bridge", "no joint states without the bridge"), **common)]
    # the excitation starts once these are connected to the joint states: a node still starting
    # on a busy host (tens of seconds beside CPU hogs) would miss the run's first seconds or all of it
    consumers = ["estimator"] + (["recorder"] if on["record"] else [])
    if on["trajectory"]:
        # one command per bridge cycle: a command rate unlike the bridge's decimates the
        # joint-state stream unevenly (uneven command stamps in the bag)
        nodes.append(Node(executable="trajectory_publisher", name="trajectory_publisher",
                          parameters=[arg("trajectory_config"), model,
                                      {"excitation_time": arg("excitation_time"), "rate": arg("rate"),
                                       "coefficients_file": arg("coefficients_file"),
                                       "start_after": ",".join(consumers)}],
                          on_exit=required("trajectory_publisher", "trajectory:=true asked for the "
                                                                   "excitation"), **common))
    # reliable deep-queue input: the bridge publishes RELIABLE, no joint state is lost on the way;
    # its effort is the torque of the previous command (core.data.effort_timing), told to the
    # estimator and written into the bag for `sysid identify`
    nodes.append(Node(executable="estimator", name="estimator",
                      parameters=[arg("estimator_config"), model,
                                  {"sample_rate": arg("rate"), "target": arg("target"),
                                   "method": arg("method"), "prior": arg("prior"), "reliable_input": True,
                                   "effort_lag": DAMIAO_REPLY}],
                      on_exit=required("estimator", "the online estimate is this launch's product"),
                      **common))
    if on["record"]:
        nodes.append(Node(executable="recorder", name="recorder",
                          parameters=[arg("recorder_config"), {"output": arg("bag"),
                                                               "effort_lag": DAMIAO_REPLY}],
                          on_exit=required("recorder", "record:=true asked for a bag of the run"), **common))
    return nodes
