"""Identify a payload (or the whole arm) on an arm whose ros2_control stack is already running.

    # a UR arm (ur_robot_driver running, scaled_joint_trajectory_controller active), payload on the flange:
    ros2 launch sysid_ros ros2_control_identify.launch.py controller:=scaled_joint_trajectory_controller \\
        target:=wrist_3_link until_precision:=0.02
    # a Franka arm (franka_ros2, a joint_trajectory_controller loaded), the model from a file:
    ros2 launch sysid_ros ros2_control_identify.launch.py controller:=fr3_arm_controller \\
        model_path:=/path/to/fr3.urdf target:=fr3_link8
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
"""

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

#: relative topic names of the nodes → the graph's topics
TOPICS = [("joint_states", "/joint_states"), ("sim/true_parameters", "/sim/true_parameters")]


def _config(name: str) -> PathJoinSubstitution:
    return PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", name])


def generate_launch_description() -> LaunchDescription:
    args = [DeclareLaunchArgument(name, default_value=default, description=description)
            for name, default, description in (
                ("controller", "joint_trajectory_controller",
                 "the running joint_trajectory_controller (topic <controller>/joint_trajectory)"),
                ("interface", "joint_trajectory",
                 "joint_trajectory (topic) | follow_joint_trajectory (action)"),
                ("model_path", "", "MJCF or URDF of the arm ('' = the robot_description topic; with "
                                   "use_sim: the package's default robot)"),
                ("robot_description_topic", "/robot_description",
                 "latched std_msgs/String of robot_state_publisher, used when model_path is ''"),
                ("target", "arm", "'arm' (every parameter) or the body carrying the unknown payload"),
                ("method", "rls_logdet", "rls | rls_logdet | momentum | ekf | mhe"),
                ("until_precision", "0.02", "excite until every required direction has this relative std "
                                            "(0 = excitation_time)"),
                ("max_duration", "120.0", "[s] longest approach + excitation before returning"),
                ("excitation_time", "30.0", "[s] of excitation when until_precision is 0"),
                ("max_velocity", "1.0", "[rad/s] joint speed limit of the excitation"),
                ("max_acceleration", "4.0", "[rad/s²] joint acceleration limit of the excitation"),
                ("sample_rate", "500.0", "[Hz] joint_state_broadcaster's rate (the controller manager's)"),
                ("record", "true", "record a rosbag2 bag of /joint_states for BatchSolve"),
                ("bag", "", "bag directory ('' = sysid_bags/run_<time>)"),
                ("use_sim", "false", "true: start the package's simulated ros2_control arm (mujoco_sim with "
                                     "joint_trajectory input) instead of using a running one"),
                ("sim_payload", "", "use_sim: the payload the simulated arm carries "
                                    "'body=NAME,mass=KG,com=X,Y,Z' ('' = none)"),
                ("lockstep", "false", "use_sim: the simulated arm steps when the trajectory publisher and "
                                      "the estimator have caught up (as fast as they go, the same run on "
                                      "a busy machine; reliable joint states)"),
                # launch's own setting (read by every process it starts): the nodes finish their
                # files and log their counters after Ctrl-C, which takes longer than launch's
                # default 5 s on a busy machine
                ("sigterm_timeout", "30", "[s] after Ctrl-C before launch escalates to SIGTERM"),
            )]
    arg = LaunchConfiguration
    # the simulated arm (use_sim) has no robot_state_publisher: model_path, else the package's robot
    model = {"model_path": arg("model_path"), "robot_description_topic": PythonExpression(
        ["'' if '", arg("use_sim"), "'.lower() in ('true', '1') else '",
         arg("robot_description_topic"), "'"])}
    common = dict(package="sysid_ros", output="screen", emulate_tty=True, remappings=TOPICS)
    nodes = [
        Node(executable="mujoco_sim", name="mujoco_sim",
             parameters=[_config("mujoco_sim.yaml"), model,
                         {"input": "joint_trajectory", "controller": arg("controller"),
                          "payload": arg("sim_payload"), "rate": arg("sample_rate"), "publish_every": 1,
                          "lockstep": arg("lockstep"), "lockstep_wait_for": ["/estimator/progress"],
                          "real_time_factor": PythonExpression(
                              ["0.0 if '", arg("lockstep"), "'.lower() in ('true', '1') else 1.0"])}],
             condition=IfCondition(arg("use_sim")), **common),
        Node(executable="trajectory_publisher", name="trajectory_publisher",
             parameters=[_config("trajectory_publisher.yaml"), model,
                         {"interface": arg("interface"), "controller": arg("controller"),
                          "lockstep": arg("lockstep"), "reliable_input": arg("lockstep"),
                          "until_precision": ParameterValue(arg("until_precision"), value_type=float),
                          "max_duration": ParameterValue(arg("max_duration"), value_type=float),
                          "excitation_time": ParameterValue(arg("excitation_time"), value_type=float),
                          "max_velocity": ParameterValue(arg("max_velocity"), value_type=float),
                          "max_acceleration": ParameterValue(arg("max_acceleration"), value_type=float)}],
             **common),
        Node(executable="estimator", name="estimator",
             parameters=[_config("estimator.yaml"), model,
                         {"target": arg("target"), "method": arg("method"),
                          "weighting": "adaptive", "reliable_input": arg("lockstep"),
                          "sample_rate": ParameterValue(arg("sample_rate"), value_type=float),
                          "payload_precision": ParameterValue(arg("until_precision"), value_type=float)}],
             **common),
        Node(executable="recorder", name="recorder",
             parameters=[_config("recorder.yaml"),
                         {"output": arg("bag"), "topics": ["/joint_states", "/sim/true_parameters"],
                          "types": ["sensor_msgs/msg/JointState", "sysid_ros/msg/ParameterEstimate"]}],
             condition=IfCondition(arg("record")), **common),
    ]
    return LaunchDescription([*args, *nodes])
