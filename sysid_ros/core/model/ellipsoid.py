"""The equivalent uniform-density ellipsoid of a body's inertia: what the inertia markers draw.

A solid ellipsoid of mass ``m`` and semi-axes ``a, b, c`` along its own axes has the principal
moments about its centre

    I1 = m (b² + c²) / 5,   I2 = m (a² + c²) / 5,   I3 = m (a² + b²) / 5,

so a body's principal moments ``I1, I2, I3`` at its CoM give

    a² = 5 (I2 + I3 − I1) / (2 m),   b² = 5 (I1 + I3 − I2) / (2 m),   c² = 5 (I1 + I2 − I3) / (2 m).

The ellipsoid sits at the CoM, its axes along the inertia's principal axes (the eigenvectors of
the inertia about the CoM, ordered as the moments, made a proper rotation: det = +1). A moment
triple that breaks the triangle inequality (a body no mass distribution realises) gives a
negative square: that axis is drawn flat (:data:`FLAT` of the largest axis, as is an exactly
flat one) and the ellipsoid is marked not realizable.

Parameters follow the package's layout (``[m, hx, hy, hz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` in
the body frame about the body origin, SI units); quaternions are ``(x, y, z, w)`` as in
``geometry_msgs/Quaternion``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.model.robot import inertial_from_body_params
from sysid_ros.core.model.spatial import mat_to_quat

__all__ = ["BODY_FIELDS", "FLAT", "BodyEllipsoid", "body_ellipsoids", "equivalent_ellipsoid"]

#: the 10 standard parameters of one body, in order
BODY_FIELDS = ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")
#: an axis that no real body would give (negative square, zero moment) is drawn this thin,
#: relative to the largest semi-axis [-]
FLAT = 0.02


@dataclass(frozen=True)
class BodyEllipsoid:
    """One body's inertia as a drawable ellipsoid, in the body frame.

    ``mass`` [kg]; ``com (3,)`` [m]; ``semi_axes (3,)`` [m] along the columns of ``rotation
    (3, 3)`` (a proper rotation, body frame ← principal frame); ``moments (3,)`` [kg·m²]: the
    principal moments at the CoM, ascending; ``quaternion (4,)``: ``rotation`` as ``(x, y, z,
    w)``; ``realizable``: the moments are positive and satisfy the triangle inequality (the
    semi-axes are exact); ``valid``: the mass is positive (else nothing is drawn)."""

    name: str
    mass: float
    com: np.ndarray
    semi_axes: np.ndarray
    rotation: np.ndarray
    moments: np.ndarray
    realizable: bool
    valid: bool = True

    @property
    def quaternion(self) -> np.ndarray:
        w, x, y, z = mat_to_quat(self.rotation)
        return np.array([x, y, z, w])


def equivalent_ellipsoid(mass: float, inertia_com: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``(semi_axes (3,) [m], rotation (3, 3), moments (3,) [kg·m²], realizable)`` of the solid
    ellipsoid of ``mass`` [kg] > 0 with the inertia ``inertia_com (3, 3)`` [kg·m²] about its
    centre (module docstring). ``rotation``'s columns are the principal axes (eigenvectors of the
    symmetric part, ascending moments), ``det(rotation) = +1``."""
    inertia = np.asarray(inertia_com, dtype=float)
    inertia = 0.5 * (inertia + inertia.T)
    moments, axes = rla.eigh(inertia)
    if np.linalg.det(axes) < 0:  # a reflection: flip one axis (an ellipsoid is symmetric about it)
        axes[:, 2] = -axes[:, 2]
    i1, i2, i3 = moments
    squares = 2.5 / mass * np.array([i2 + i3 - i1, i1 + i3 - i2, i1 + i2 - i3])
    scale = max(float(np.max(squares)), 0.0)
    realizable = bool(moments.min() > 0 and squares.min() >= 0)
    semi = np.sqrt(np.where(squares > 0, squares, (FLAT**2) * scale))
    return semi, axes, moments, realizable


def body_ellipsoids(names: Sequence[str], values: Sequence[float] | Mapping[str, float]
                    ) -> list[BodyEllipsoid]:
    """The ellipsoid of every body whose 10 parameters ``<body>.<field>`` (:data:`BODY_FIELDS`)
    are among ``names``, in the order the bodies first appear; ``values (p,)`` aligned with
    ``names`` (or a mapping name → value). Joint terms and other names are ignored. A body with a
    mass ≤ 0 comes back ``valid=False`` (no CoM, nothing to draw)."""
    if isinstance(values, Mapping):
        table = {n: float(values[n]) for n in names}
    else:
        vals = np.asarray(values, dtype=float).reshape(-1)
        if vals.size != len(names):
            raise ValueError(f"expected one value per name ({len(names)}), got {vals.size}")
        table = dict(zip(names, vals.tolist(), strict=True))
    bodies: list[str] = []
    for name in names:
        body, _, field = name.rpartition(".")
        if field == "m" and body and all(f"{body}.{f}" in table for f in BODY_FIELDS) and body not in bodies:
            bodies.append(body)
    out = []
    for body in bodies:
        phi = np.array([table[f"{body}.{f}"] for f in BODY_FIELDS])
        out.append(_ellipsoid_of(body, phi))
    return out


def _ellipsoid_of(name: str, phi: np.ndarray) -> BodyEllipsoid:
    mass = float(phi[0])
    if not mass > 0:
        return BodyEllipsoid(name, mass, np.zeros(3), np.zeros(3), np.eye(3), np.zeros(3), False, False)
    _, com, inertia_com = inertial_from_body_params(phi)
    semi, rot, moments, realizable = equivalent_ellipsoid(mass, inertia_com)
    return BodyEllipsoid(name, mass, com, semi, rot, moments, realizable)
