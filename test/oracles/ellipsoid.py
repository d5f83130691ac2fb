"""Independent references for inertia ellipsoids: a unit quaternion's rotation matrix (the
textbook formula) and the principal moments of a solid ellipsoid (I1 = m (b² + c²) / 5, ...)."""

from __future__ import annotations

import numpy as np


def quat_xyzw_to_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w): the textbook formula, written here."""
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def solid_ellipsoid_moments(mass: float, semi: np.ndarray) -> np.ndarray:
    a, b, c = semi
    return mass / 5 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
