"""The closed loop in simulation: mujoco_sim ← trajectory_publisher, joint states → estimator (+ bag).

    ros2 launch sysid_ros sim_identify.launch.py payload:="body=link_6,mass=0.6,com=0.01,-0.015,0.045" \\
        target:=link_6 method:=rls_logdet real_time_factor:=2.0 record:=true bag:=sysid_bags/run1

Then `ros2 action send_goal --feedback batch_solve sysid_ros/action/BatchSolve "{bag_path: run1}"`
(or `ros2 service call /batch_solve sysid_ros/srv/BatchSolve ...`) on the bag with
batch_solver.launch.py, or `ros2 topic echo /estimator/estimate`. Every tunable is in
config/*.yaml (units in the comments); the arguments below override the common ones. Nodes other
than the simulator run on its /clock. All names are relative: the whole graph moves under a
namespace (a ``PushRosNamespace`` around this file's ``IncludeLaunchDescription``).

``lockstep:=true`` (default): the simulator advances only when the trajectory publisher's commands
and the estimator's (and, when recording, the recorder's) ``~/progress`` have caught up, so the
run is the same on a busy machine as on an idle one; ``real_time_factor`` then only caps the
speed (0 = as fast as the graph goes). A consumer silent for ``lockstep_timeout`` seconds of wall
time ends the run with an error (the bag recorded so far is finished). ``lockstep:=false``:
free-running physics paced by the wall clock (interactive use; what reaches the nodes then depends
on the load); stepping still starts only once the consumers are connected, so the bag holds the
run from its first state.

Checked before any node starts: switches take exactly what launch's IfCondition takes
(true/false/1/0, any case); ``bag`` must not exist yet; ``model`` must be a file. Every node is
required: when one ends, one line names it and the launch stops (the others finish their files).
"""

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from sysid_ros.nodes.launch_checks import declare, model_file, new_bag, required, run_arguments, switch

ARGUMENTS = (
    ("model", "", "MJCF of the robot ('' = the default robot)"),
    ("payload", "body=link_6,mass=0.6,com=0.01,-0.015,0.045",
     "payload the estimator does not know ('' = none)"),
    *run_arguments("target", "method", target="link_6"),
    ("prior", "uninformative", "estimator prior: nominal | uninformative | a result.json"),
    ("alpha", "100.0", "log-det regularisation strength"),
    ("real_time_factor", "1.0", "at most this many simulated seconds per wall second "
                                "(0 = as fast as the graph goes)"),
    *run_arguments("lockstep", "lockstep_timeout", "excitation_time", "record", "bag", lockstep="true"),
)
SWITCHES = ("lockstep", "record")


def _config(name: str) -> PathJoinSubstitution:
    return PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", f"{name}.yaml"])


def _graph(context: LaunchContext) -> list[Node]:
    """The nodes, once the arguments are checked (an error here starts no node)."""
    # parameters get the substitutions (launch_ros types "2" as a number), the checks their text
    value = {name: LaunchConfiguration(name) for name, _, _ in ARGUMENTS}
    on = {name: switch(name, value[name].perform(context)) for name in SWITCHES}
    model_file("model", value["model"].perform(context))
    if on["record"]:
        new_bag("bag", value["bag"].perform(context))
    sim_time = {"use_sim_time": True}
    model = {"model_path": value["model"]}
    # relative names: the estimator's and recorder's ~/progress in this launch's namespace
    wait_for = ["estimator/progress"] + (["recorder/progress"] if on["record"] else [])
    nodes = [
        Node(package="sysid_ros", executable="mujoco_sim", name="mujoco_sim", output="screen",
             parameters=[_config("mujoco_sim"), model,
                         {"payload": value["payload"], "real_time_factor": value["real_time_factor"],
                          "lockstep": on["lockstep"], "lockstep_wait_for": wait_for,
                          "lockstep_timeout": value["lockstep_timeout"]}],
             on_exit=required("mujoco_sim", "the simulation is the run")),
        Node(package="sysid_ros", executable="trajectory_publisher", name="trajectory_publisher",
             output="screen", parameters=[_config("trajectory_publisher"), model, sim_time,
                                          {"excitation_time": value["excitation_time"],
                                           "reliable_input": True, "lockstep": on["lockstep"]}],
             on_exit=required("trajectory_publisher", "no commands move the simulated arm without it")),
        Node(package="sysid_ros", executable="estimator", name="estimator", output="screen",
             parameters=[_config("estimator"), model, sim_time,
                         {"target": value["target"], "method": value["method"], "prior": value["prior"],
                          "alpha": value["alpha"], "reliable_input": True}],
             on_exit=required("estimator", "the online estimate is this launch's product")),
    ]
    if on["record"]:
        # (`ros2 bag record -s mcap --use-sim-time joint_states motor_command sim/true_parameters`
        # is an equally valid recorder on a ROS install.)
        nodes.append(Node(package="sysid_ros", executable="recorder", name="recorder", output="screen",
                          parameters=[_config("recorder"), sim_time, {"output": value["bag"]}],
                          on_exit=required("recorder", "record:=true asked for a bag of the run")))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*declare(ARGUMENTS), OpaqueFunction(function=_graph)])
