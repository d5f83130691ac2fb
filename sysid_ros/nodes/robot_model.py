"""Where a node's robot model comes from: the parameters every node with a model declares, and the
``/robot_description`` topic as ``robot_state_publisher`` publishes it.

The first of these that is set is the model (MJCF or URDF; read by
:meth:`~sysid_ros.core.model.robot.RobotModel.load`):

1. ``model_path`` (a BatchSolve request's ``model_path`` before it), a file;
2. ``robot_description``, the XML text;
3. the latched ``std_msgs/String`` on ``robot_description_topic`` (e.g. ``/robot_description``),
   waited for at most ``robot_description_timeout`` seconds with a log line saying so;
4. the package's default robot.

``base`` fixes or floats the root (see :meth:`RobotModel.from_mjcf`).
"""

from __future__ import annotations

import threading
import time

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.resources import default_robot_path
from sysid_ros.nodes.parameters import parameter_value

#: ``(name, default, description)`` rows for :func:`~sysid_ros.nodes.parameters.declare_parameters`
MODEL_PARAMETERS = (
    ("model_path", "", "MJCF or URDF file of the robot ('' = robot_description, else the "
                       "robot_description_topic, else the package's default robot)"),
    ("robot_description", "", "URDF or MJCF XML text of the robot (used when model_path is '')"),
    ("robot_description_topic", "", "when model_path and robot_description are '': take the model "
                                    "from this latched std_msgs/String topic, e.g. /robot_description "
                                    "('' = the package's default robot)"),
    ("robot_description_timeout", 10.0, "longest wait for the robot_description_topic [s]"),
    ("base", "", "'' (as the model says), 'fixed' or 'floating' (a free joint on the root link)"),
)
#: parameters whose change means another model
MODEL_PARAMETER_NAMES = frozenset(name for name, _, _ in MODEL_PARAMETERS)


class RobotModelSource:
    """A node's model, loaded from its parameters (see the module docstring). Create it after the
    parameters are declared: it subscribes to ``robot_description_topic`` when that is set."""

    def __init__(self, node) -> None:
        from std_msgs.msg import String

        from sysid_ros.nodes.qos import LATCHED

        self._node = node
        self._text: str | None = None
        self._received = threading.Event()
        self.topic = str(parameter_value(node, "robot_description_topic") or "")
        #: where the last loaded model came from (for log lines)
        self.origin = ""
        if self.topic:
            node.create_subscription(String, self.topic, self._on_description, LATCHED)

    def _on_description(self, msg) -> None:
        self._text = msg.data
        self._received.set()

    def load(self, get=None, *, model_path: str = "", **kwargs) -> RobotModel:
        """The model the parameter values ``get(name)`` (default: the node's) describe;
        ``model_path`` (e.g. a request's) comes first when given. Keyword options as in
        :class:`RobotModel`. Raises :class:`SysIdError` saying what is wrong."""
        get = get or (lambda name: parameter_value(self._node, name))
        base = get("base") or None
        path = model_path or get("model_path")
        if path:
            self.origin = str(path)
            return RobotModel.load(str(path), base=base, **kwargs)
        text = get("robot_description")
        if text:
            self.origin = "the robot_description parameter"
            return _from_text(text, self.origin, base, kwargs)
        if self.topic:
            text = self._wait(float(get("robot_description_timeout")))
            self.origin = f"the {self.topic} topic"
            model = _from_text(text, self.origin, base, kwargs)
            self._node.get_logger().info(f"robot model from {self.origin}: joints "
                                         f"{list(model.dof_joint_names)}")
            return model
        self.origin = str(default_robot_path())
        return RobotModel.load(self.origin, base=base, **kwargs)

    def _wait(self, timeout: float) -> str:
        """The topic's text, waiting at most ``timeout`` seconds: on the node's executor when the
        node spins (a service worker thread), else spinning the node on a private one (start-up)."""
        if not self._received.is_set():
            self._node.get_logger().info(
                f"waiting up to {timeout:g} s for the robot model on {self.topic} (std_msgs/String, "
                "transient local, as robot_state_publisher publishes it)")
            if self._node.executor is not None:
                self._received.wait(timeout)
            else:
                self._spin_until_received(timeout)
        if self._text is None:
            raise SysIdError(f"no robot model on {self.topic} within {timeout:g} s: set model_path or "
                             "robot_description, or start the node that publishes it "
                             "(robot_state_publisher)")
        return self._text

    def _spin_until_received(self, timeout: float) -> None:
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor(context=self._node.context)
        executor.add_node(self._node)
        try:
            deadline = time.monotonic() + timeout
            while not self._received.is_set() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=min(0.1, max(0.0, deadline - time.monotonic())))
        finally:
            executor.remove_node(self._node)
            executor.shutdown()


def _from_text(text: str, origin: str, base: str | None, kwargs) -> RobotModel:
    if not text.lstrip().startswith("<"):
        raise SysIdError(f"{origin}: expected URDF or MJCF XML text, got {text[:40]!r}")
    try:
        return RobotModel.load(text, base=base, **kwargs)
    except SysIdError as exc:
        raise SysIdError(f"{origin}: {exc}") from None
