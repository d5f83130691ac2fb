"""The closed loop in simulation: mujoco_sim ← trajectory_publisher, joint states → estimator (+ bag).

    ros2 launch sysid_ros sim_identify.launch.py payload:="body=link_6,mass=0.6,com=0.01,-0.015,0.045" \\
        target:=link_6 method:=rls_logdet real_time_factor:=2.0 record:=true bag:=sysid_bags/run1

Then `ros2 service call /batch_solver/...` on the bag (batch_solver.launch.py), or
`ros2 topic echo /estimator/estimate`. Every tunable is in config/*.yaml (units in the comments);
the arguments below override the common ones. Nodes other than the simulator run on its /clock.

``lockstep:=true`` (default): the simulator advances only when the trajectory publisher's commands
and the estimator's (and, when recording, the recorder's) ``~/progress`` have caught up, so the
run is the same on a busy machine as on an idle one; ``real_time_factor`` then only caps the
speed (0 = as fast as the graph goes). ``lockstep:=false``: free-running physics paced by the wall
clock (interactive use; what reaches the nodes then depends on the load). Switches take
true/false/1/0 (as IfCondition does), numbers take 2 or 2.0.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("sysid_ros")

    def config(name: str):
        return PathJoinSubstitution([share, "config", f"{name}.yaml"])

    arg = LaunchConfiguration
    args = [DeclareLaunchArgument(name, default_value=default, description=description)
            for name, default, description in (
                ("model", "", "MJCF of the robot ('' = the default robot)"),
                ("payload", "body=link_6,mass=0.6,com=0.01,-0.015,0.045",
                 "payload the estimator does not know ('' = none)"),
                ("target", "link_6", "estimator target: 'arm' or the payload's body"),
                ("method", "rls_logdet", "rls | rls_logdet | momentum"),
                ("prior", "uninformative", "estimator prior: nominal | uninformative | a result.json"),
                ("alpha", "100.0", "log-det regularisation strength"),
                ("real_time_factor", "1.0", "at most this many simulated seconds per wall second "
                                            "(0 = as fast as the graph goes)"),
                ("lockstep", "true", "physics waits for the commands and the consumers' progress "
                                     "(deterministic); false: free-running at real_time_factor"),
                ("excitation_time", "30.0", "[s] of excitation"),
                ("record", "true", "record a rosbag2 bag"),
                ("bag", "", "bag directory ('' = sysid_bags/run_<time>)"),
            )]
    sim_time = {"use_sim_time": True}
    model = {"model_path": arg("model")}

    def simulator(context: LaunchContext) -> list[Node]:
        """mujoco_sim, waiting in lockstep for the estimator and (when recording) the recorder."""
        wait_for = ["/estimator/progress"]
        if IfCondition(arg("record")).evaluate(context):
            wait_for.append("/recorder/progress")
        return [Node(package="sysid_ros", executable="mujoco_sim", name="mujoco_sim", output="screen",
                     parameters=[config("mujoco_sim"), model,
                                 {"payload": arg("payload"), "real_time_factor": arg("real_time_factor"),
                                  "lockstep": arg("lockstep"), "lockstep_wait_for": wait_for}])]

    nodes = [
        OpaqueFunction(function=simulator),
        Node(package="sysid_ros", executable="trajectory_publisher", name="trajectory_publisher",
             output="screen", parameters=[config("trajectory_publisher"), model, sim_time,
                                          {"excitation_time": arg("excitation_time"),
                                           "reliable_input": True, "lockstep": arg("lockstep")}]),
        Node(package="sysid_ros", executable="estimator", name="estimator", output="screen",
             parameters=[config("estimator"), model, sim_time,
                         {"target": arg("target"), "method": arg("method"), "prior": arg("prior"),
                          "alpha": arg("alpha"), "reliable_input": True}]),
        Node(package="sysid_ros", executable="recorder", name="recorder", output="screen",
             condition=IfCondition(arg("record")),
             parameters=[config("recorder"), sim_time, {"output": arg("bag")}]),
    ]
    # (`ros2 bag record -s mcap --use-sim-time /joint_states /motor_command /sim/true_parameters`
    # is an equally valid recorder on a ROS install.)
    return LaunchDescription([*args, *nodes])

