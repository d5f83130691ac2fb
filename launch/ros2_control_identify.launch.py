"""Identify a payload (or the whole arm) on an arm whose ros2_control stack is already running.

    # a UR arm (ur_robot_driver running, scaled_joint_trajectory_controller active), payload on the flange:
    ros2 launch sysid_ros ros2_control_identify.launch.py controller:=scaled_joint_trajectory_controller \\
        target:=wrist_3_link until_precision:=0.02
    # a Franka arm (franka_ros2, a joint_trajectory_controller loaded), the model from a file; the
    # controller commands the 7 arm joints, not the URDF's finger joints:
    ros2 launch sysid_ros ros2_control_identify.launch.py controller:=fr3_arm_controller \\
        model_path:=/path/to/fr3.urdf target:=fr3_link8 \\
        joints:=fr3_joint1,fr3_joint2,fr3_joint3,fr3_joint4,fr3_joint5,fr3_joint6,fr3_joint7
    # no arm at hand: the simulated ros2_control arm of the package stands in
    ros2 launch sysid_ros ros2_control_identify.launch.py use_sim:=true \\
        model_path:=$(ros2 pkg prefix sysid_ros)/share/sysid_ros/config/robots/yam_damiao.xml target:=link_6

The graph: ``trajectory_publisher`` sends the excitation as ``trajectory_msgs/JointTrajectory`` to
``<controller>/joint_trajectory`` (``interface:=follow_joint_trajectory``: goals of the controller's
``FollowJointTrajectory`` action, where control_msgs is installed); ``joint_state_broadcaster``'s
``/joint_states`` (effort = joint torque; see ``torque_scale`` in config/estimator.yaml for drivers
that publish currents) feed the ``estimator``, which publishes ``/estimator/estimate``,
``/estimator/precision`` and, once the payload is determined to ``until_precision``, the payload as
``geometry_msgs/Inertia`` on the latched ``/estimator/payload`` (``ros2 service call
/estimator/commit_payload std_srvs/srv/Trigger`` publishes the current one on demand); the
``recorder`` writes a rosbag2 bag for ``BatchSolve``. The robot model comes from ``model_path``, else
from the latched ``robot_description`` topic of ``robot_state_publisher``. Nothing here commands the
driver's payload: forwarding the Inertia to UR's ``set_payload`` or Franka's ``setLoad`` is the
user's call (docs/ros2_control.md shows both).

Every name is relative (the nodes' ``joint_states``, ``<controller>/joint_trajectory``,
``estimator/progress``...): a ``PushRosNamespace`` around this file's ``IncludeLaunchDescription``
(or ``-r __ns:=``) moves the graph, and an arm whose ros2_control runs in a namespace is reached by
launching this file in the same one.

Checked before any node starts: switches take exactly what launch's IfCondition takes
(true/false/1/0, any case), ``bag`` must not exist yet, ``model_path`` must be a file. The trajectory
publisher, the estimator, (with ``use_sim``) the simulated arm and (when recording) the recorder are
required: when one ends, one line names it and the launch stops (the recorder finishes its bag).
"""

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from sysid_ros.nodes.launch_checks import declare, model_file, new_bag, required, run_arguments, switch

ARGUMENTS = (
    ("controller", "joint_trajectory_controller",
     "the running joint_trajectory_controller (topic <controller>/joint_trajectory)"),
    ("interface", "joint_trajectory", "joint_trajectory (topic) | follow_joint_trajectory (action)"),
    ("joints", "", "the controller's joints, comma-separated ('' = every joint of the model): only "
                   "these are excited and named in the trajectories, the others stay at their start pose"),
    ("model_path", "", "MJCF or URDF of the arm ('' = the robot_description topic; with "
                       "use_sim: the package's default robot)"),
    ("robot_description_topic", "/robot_description",
     "latched std_msgs/String of robot_state_publisher, used when model_path is ''"),
    *run_arguments("target", "method"),
    ("until_precision", "0.02", "excite until every required direction has this relative std "
                                "(0 = excitation_time)"),
    ("max_duration", "120.0", "[s] longest approach + excitation before returning"),
    *run_arguments("excitation_time"),
    ("max_velocity", "1.0", "[rad/s] joint speed limit of the excitation"),
    ("max_acceleration", "4.0", "[rad/s²] joint acceleration limit of the excitation"),
    ("sample_rate", "500.0", "[Hz] joint_state_broadcaster's rate (the controller manager's)"),
    *run_arguments("record", "bag"),
    ("use_sim", "false", "true: start the package's simulated ros2_control arm (mujoco_sim with "
                         "joint_trajectory input) instead of using a running one"),
    ("sim_payload", "", "use_sim: the payload the simulated arm carries "
                        "'body=NAME,mass=KG,com=X,Y,Z' ('' = none)"),
    *run_arguments("lockstep", "lockstep_timeout"),
    # launch's own setting (read by every process it starts): the nodes finish their files and
    # log their counters after Ctrl-C, which takes longer than launch's default 5 s on a busy host
    ("sigterm_timeout", "30", "[s] after Ctrl-C before launch escalates to SIGTERM"),
)
SWITCHES = ("use_sim", "record", "lockstep")
FLOATS = ("until_precision", "max_duration", "excitation_time", "max_velocity", "max_acceleration",
          "sample_rate", "lockstep_timeout")


def _config(name: str) -> PathJoinSubstitution:
    return PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", f"{name}.yaml"])


def _graph(context: LaunchContext) -> list[Node]:
    """The nodes, once the arguments are checked (an error here starts no node)."""
    value = {name: LaunchConfiguration(name) for name, _, _ in ARGUMENTS}
    on = {name: switch(name, value[name].perform(context)) for name in SWITCHES}
    model_file("model_path", value["model_path"].perform(context))
    if on["record"]:
        new_bag("bag", value["bag"].perform(context))
    number = {name: ParameterValue(value[name], value_type=float) for name in FLOATS}
    # the simulated arm (use_sim) has no robot_state_publisher: model_path, else the package's robot
    model = {"model_path": value["model_path"],
             "robot_description_topic": "" if on["use_sim"] else value["robot_description_topic"]}
    common = dict(package="sysid_ros", output="screen", emulate_tty=True)
    nodes = []
    if on["use_sim"]:
        nodes.append(Node(
            executable="mujoco_sim", name="mujoco_sim",
            parameters=[_config("mujoco_sim"), model,
                        {"input": "joint_trajectory", "controller": value["controller"],
                         "payload": value["sim_payload"], "rate": number["sample_rate"], "publish_every": 1,
                         "lockstep": on["lockstep"], "lockstep_wait_for": ["estimator/progress"],
                         "lockstep_timeout": number["lockstep_timeout"],
                         "real_time_factor": 0.0 if on["lockstep"] else 1.0}],
            on_exit=required("mujoco_sim", "use_sim:=true: the simulated arm is the run"), **common))
    nodes += [
        Node(executable="trajectory_publisher", name="trajectory_publisher",
             parameters=[_config("trajectory_publisher"), model,
                         {"interface": value["interface"], "controller": value["controller"],
                          "joints": ParameterValue(value["joints"], value_type=str),
                          "lockstep": on["lockstep"], "reliable_input": on["lockstep"],
                          **{k: number[k] for k in ("until_precision", "max_duration", "excitation_time",
                                                    "max_velocity", "max_acceleration")}}],
             on_exit=required("trajectory_publisher", "no excitation without it"), **common),
        Node(executable="estimator", name="estimator",
             parameters=[_config("estimator"), model,
                         {"target": value["target"], "method": value["method"], "weighting": "adaptive",
                          "reliable_input": on["lockstep"], "sample_rate": number["sample_rate"],
                          "payload_precision": number["until_precision"]}],
             on_exit=required("estimator", "the online estimate is this launch's product"), **common),
    ]
    if on["record"]:
        nodes.append(Node(executable="recorder", name="recorder",
                          parameters=[_config("recorder"),
                                      {"output": value["bag"],
                                       "topics": ["joint_states", "sim/true_parameters"],
                                       "types": ["sensor_msgs/msg/JointState",
                                                 "sysid_ros/msg/ParameterEstimate"]}],
                          on_exit=required("recorder", "record:=true asked for a bag of the run"), **common))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*declare(ARGUMENTS), OpaqueFunction(function=_graph)])
