"""Inertia markers as data: per body, the identified equivalent ellipsoid and CoM sphere beside the
nominal model's, for RViz and Foxglove (the nodes turn :class:`MarkerSpec` into
``visualization_msgs/Marker``; nothing here imports ROS).

Each body gives four markers, in namespaces :data:`NAMESPACES` with the body's index as id:
``identified`` (ellipsoid, :func:`~sysid_ros.core.model.ellipsoid.body_ellipsoids`),
``identified_com`` (sphere of :data:`COM_DIAMETER`), ``nominal`` and ``nominal_com``. Colours:
identified blue, nominal orange and more transparent, an identified ellipsoid that no mass
distribution realises red. The identified markers' opacity says how precise the body's estimate
is (:func:`precision_alpha`).

Frames: ``frame="links"`` places each marker in its body's own frame (``frame_id`` = the body
name = the URDF link, TF from robot_state_publisher); ``frame="base"`` poses them in the frame of
the model's root body from the package's forward kinematics at a configuration ``q`` (for setups
without TF).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.ellipsoid import BodyEllipsoid, body_ellipsoids
from sysid_ros.core.model.kinematics import forward_poses
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.spatial import mat_to_quat
from sysid_ros.core.model.target import Target

__all__ = ["COM_DIAMETER", "MARKER_FRAMES", "NAMESPACES", "MarkerSpec", "inertia_markers",
           "precision_alpha", "target_markers"]

NAMESPACES = ("identified", "identified_com", "nominal", "nominal_com")
MARKER_FRAMES = ("links", "base")
#: diameter of a CoM sphere [m]
COM_DIAMETER = 0.02
_BLUE = (0.12, 0.47, 0.71)
_ORANGE = (1.0, 0.5, 0.05)
_RED = (0.84, 0.15, 0.16)
_NOMINAL_ALPHA = 0.3


@dataclass(frozen=True)
class MarkerSpec:
    """One sphere/ellipsoid marker: ``ns``/``id``, ``frame`` (a body name), ``position (3,)``
    [m], ``orientation (4,)`` (x, y, z, w), ``scale (3,)`` [m] (diameters along its own axes),
    ``rgba (4,)``, ``text``: what it is (body, mass)."""

    ns: str
    id: int
    frame: str
    position: np.ndarray
    orientation: np.ndarray
    scale: np.ndarray
    rgba: tuple[float, float, float, float]
    text: str


def precision_alpha(relative_std: float) -> float:
    """Opacity of an identified marker for the body's relative standard deviation ``relative_std``
    [-] (its mass's and principal inertias' largest): 0.9 at 2 % or better, 0.2 at 100 % or worse,
    log-linear between; 0.6 when unknown (NaN)."""
    if not math.isfinite(relative_std):
        return 0.6
    lo, hi = math.log(0.02), math.log(1.0)
    s = min(max((math.log(max(relative_std, 1e-12)) - lo) / (hi - lo), 0.0), 1.0)
    return 0.9 - 0.7 * s


def _relative_std(body: str, values: Mapping[str, float], std: Mapping[str, float]) -> float:
    rel = [abs(std[n]) / abs(values[n]) for n in (f"{body}.{f}" for f in ("m", "Ixx", "Iyy", "Izz"))
           if n in std and math.isfinite(std[n]) and values.get(n)]
    return max(rel) if rel else math.nan


def inertia_markers(names: Sequence[str], values: Sequence[float], *,
                    std: Sequence[float] | None = None, nominal: Mapping[str, float] | None = None,
                    frame: Literal["links", "base"] = "links", frames: Mapping[str, str] | None = None,
                    model: RobotModel | None = None, joint_positions: np.ndarray | None = None
                    ) -> list[MarkerSpec]:
    """The markers (module docstring) of the parameters ``values (p,)`` named ``names``, with their
    standard deviations ``std (p,)`` (NaN where unknown) and the ``nominal`` values by name.
    ``frame="base"`` needs the ``model`` and takes the ``joint_positions (n,)`` [rad or m] of its
    hinge/slide joints in ``model.dof_joint_names`` order (default: the model's reference
    configuration ``qpos0``). ``frames``: the link a body prefix lives on when it is not a link
    itself (``{"payload": "link_6"}``: :func:`target_markers`)."""
    if frame not in MARKER_FRAMES:
        raise SysIdError(f"markers_frame must be one of {list(MARKER_FRAMES)}, got {frame!r}")
    table = dict(zip(names, map(float, values), strict=True))
    deviations = dict(zip(names, map(float, std), strict=True)) if std is not None else {}
    identified = body_ellipsoids(list(names), table)
    nominal_by_body = ({e.name: e for e in body_ellipsoids(list(nominal), nominal)} if nominal else {})
    poses = _root_poses(model, joint_positions) if frame == "base" else {}
    root = _root_name(model) if frame == "base" else ""
    out: list[MarkerSpec] = []
    frames = dict(frames or {})
    for k, e in enumerate(identified):
        link = frames.get(e.name, e.name)
        if frame == "base" and link not in poses:
            raise SysIdError(f"body {link!r} of the estimate is not in the model")
        place = poses.get(link)
        alpha = precision_alpha(_relative_std(e.name, table, deviations))
        color = _BLUE if e.realizable else _RED
        out += _body_markers(e, k, "identified", (*color, alpha), place, root or link)
        nom = nominal_by_body.get(e.name)
        if nom is not None:
            out += _body_markers(nom, k, "nominal", (*_ORANGE, _NOMINAL_ALPHA), place, root or link)
    return out


def _body_markers(e: BodyEllipsoid, k: int, kind: str, rgba: tuple[float, ...],
                  place: tuple[np.ndarray, np.ndarray] | None, frame: str) -> list[MarkerSpec]:
    """The ellipsoid and CoM sphere of ``e`` in ``frame``: its link's, or with ``place`` (the
    link's pose in the root frame) the root's."""
    if not e.valid:
        return []
    rot, pos = e.rotation, e.com
    if place is not None:
        r_body, p_body = place
        rot, pos = r_body @ rot, p_body + r_body @ pos
    w, x, y, z = mat_to_quat(rot)
    text = f"{e.name} ({kind}): {e.mass:.4g} kg"
    return [MarkerSpec(kind, k, frame, pos, np.array([x, y, z, w]), 2 * e.semi_axes, tuple(rgba), text),
            MarkerSpec(f"{kind}_com", k, frame, pos, np.array([0.0, 0.0, 0.0, 1.0]),
                       np.full(3, COM_DIAMETER), (*tuple(rgba[:3]), min(1.0, rgba[3] + 0.3)), text)]


def target_markers(target: Target) -> tuple[dict[str, float] | None, dict[str, str]]:
    """``(nominal, frames)`` for :func:`inertia_markers` of an estimate of ``target``: an arm's
    nominal parameters (its model file's), none for a payload (its prior is a placeholder), whose
    ``payload`` block lives on the body it is attached to."""
    if target.kind == "arm":
        return dict(zip(target.model.param_names, map(float, target.model.nominal), strict=True)), {}
    return None, {"payload": target.model.body_name(target.body)}


def _root_name(model: RobotModel | None) -> str:
    if model is None:
        raise SysIdError("markers_frame 'base' needs the robot model")
    return model.body_name(1)


def _root_poses(model: RobotModel | None, joint_positions: np.ndarray | None
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{body: (R (3, 3), p (3,))}`` of every body in the frame of the model's root body (the
    first body under the world) at the joint positions (``qpos0`` elsewhere)."""
    if model is None:
        raise SysIdError("markers_frame 'base' needs the robot model")
    q = np.array(model.mj.qpos0, dtype=float)
    if joint_positions is not None:
        given = np.asarray(joint_positions, dtype=float).reshape(-1)
        if given.size != len(model.dof_joint_names):
            raise SysIdError(f"expected {len(model.dof_joint_names)} joint positions "
                             f"{list(model.dof_joint_names)}, got {given.size}")
        q[model.joint_qpos_indices] = given
    poses = forward_poses(model, q[None])
    rot, pos = poses.rot[..., 0], poses.pos[..., 0]  # (nb, 3, 3), (nb, 3): world frame, body id - 1
    r0, p0 = rot[0], pos[0]
    return {model.body_name(b + 1): (r0.T @ rot[b], r0.T @ (pos[b] - p0)) for b in range(rot.shape[0])}
