"""Start the batch_solver node: `ros2 launch sysid_ros batch_solver.launch.py data_root:=~/bags`.

Then, with progress and cancel (Ctrl-C cancels the goal):
`ros2 action send_goal --feedback batch_solve sysid_ros/action/BatchSolve "{bag_path: run1, method: pc_iv}"`,
or in one blocking call: `ros2 service call batch_solve sysid_ros/srv/BatchSolve "{bag_path: run1}"`.
Names are relative (``/batch_solve`` in the root namespace, ``/arm/batch_solve`` under a pushed
namespace ``arm``). ``model_path`` must name a file if given (checked before the node starts).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription
from sysid_ros.nodes.launch_checks import model_file


def _node(context: LaunchContext) -> list[Node]:
    model_file("model_path", LaunchConfiguration("model_path").perform(context))
    return [Node(
        package="sysid_ros",
        executable="batch_solver",
        name="batch_solver",
        output="screen",
        parameters=[LaunchConfiguration("config"), {
            "data_root": LaunchConfiguration("data_root"),
            "output_root": LaunchConfiguration("output_root"),
            "model_path": LaunchConfiguration("model_path"),
            "model_root": LaunchConfiguration("model_root"),
        }],
    )]


def generate_launch_description() -> LaunchDescription:
    config = PathJoinSubstitution([FindPackageShare("sysid_ros"), "config", "batch_solver.yaml"])
    args = [
        DeclareLaunchArgument("config", default_value=config, description="parameter file"),
        DeclareLaunchArgument("data_root", default_value="sysid_data",
                              description="folder of the bags (requests are relative to it)"),
        DeclareLaunchArgument("output_root", default_value="sysid_results",
                              description="results are written only under this folder"),
        DeclareLaunchArgument("model_path", default_value="",
                              description="MJCF of the robot ('' = the package's default robot)"),
        DeclareLaunchArgument("model_root", default_value="",
                              description="a request's model_path must lie under this folder or be one "
                                          "of the package's robot models ('' = data_root)"),
    ]
    return LaunchDescription([*args, OpaqueFunction(function=_node)])
