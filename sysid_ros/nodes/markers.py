"""``~/markers``: the inertia markers (:mod:`sysid_ros.core.report.markers`) as a
``visualization_msgs/MarkerArray`` (conversion only; the geometry is the core's).

The estimator and the batch solver each own an :class:`InertiaMarkerPublisher`; the parameter
``markers_frame`` (:data:`MARKER_PARAMETERS`) chooses the link frames (TF from
robot_state_publisher) or the model's root frame (the package's forward kinematics).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rclpy.node import Node
from visualization_msgs.msg import Marker, MarkerArray

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import Target
from sysid_ros.core.report.markers import MARKER_FRAMES, MarkerSpec, inertia_markers, target_markers
from sysid_ros.nodes.qos import LATCHED

__all__ = ["MARKER_PARAMETERS", "InertiaMarkerPublisher", "check_markers_frame", "to_marker_array"]

MARKER_PARAMETERS = (
    ("markers_frame", "links", "~/markers in each link's frame ('links': TF from robot_state_publisher) "
                               "or posed in the model's root link frame by the package's own forward "
                               "kinematics ('base': setups without TF)"),
)


def check_markers_frame(value: str) -> None:
    """:class:`SysIdError` unless ``value`` is a ``markers_frame`` choice."""
    if value not in MARKER_FRAMES:
        raise SysIdError(f"markers_frame must be one of {list(MARKER_FRAMES)}, got {value!r}")


def to_marker_array(specs: Sequence[MarkerSpec], *, stamp=None, frame_locked: bool = True) -> MarkerArray:
    """One ``Marker`` (SPHERE, ADD; its scale makes it an ellipsoid) per spec, preceded by a
    DELETEALL so bodies that left the estimate disappear."""
    out = MarkerArray()
    clear = Marker()
    clear.action = Marker.DELETEALL
    out.markers.append(clear)
    for s in specs:
        m = Marker()
        if stamp is not None:
            m.header.stamp = stamp
        m.header.frame_id = s.frame
        m.ns, m.id = s.ns, int(s.id)
        m.type, m.action = Marker.SPHERE, Marker.ADD
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in s.position)
        (m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z,
         m.pose.orientation.w) = (float(v) for v in s.orientation)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in s.scale)
        m.color.r, m.color.g, m.color.b, m.color.a = (float(v) for v in s.rgba)
        m.frame_locked = frame_locked
        m.text = s.text
        out.markers.append(m)
    return out


class InertiaMarkerPublisher:
    """``~/markers`` of ``node`` (latched: a late RViz or recorder gets the last array)."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._publisher = node.create_publisher(MarkerArray, "~/markers", LATCHED)

    def publish(self, target: Target, names: Sequence[str], values: Sequence[float], *,
                std: Sequence[float] | None = None, joint_positions: np.ndarray | None = None,
                stamp=None) -> MarkerArray:
        """Publish the markers of an estimate ``values`` (``std``) of ``target``'s parameters
        ``names``, posed at ``joint_positions`` with ``markers_frame: base``."""
        frame = str(self._node.get_parameter("markers_frame").value)
        nominal, frames = target_markers(target)
        specs = inertia_markers(names, values, std=std, nominal=nominal, frame=frame, frames=frames,
                                model=target.model, joint_positions=joint_positions)
        msg = to_marker_array(specs, stamp=stamp, frame_locked=frame == "links")
        self._publisher.publish(msg)
        return msg
