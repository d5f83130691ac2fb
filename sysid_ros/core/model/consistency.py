"""Physical consistency of inertial parameters: pseudo-inertia, checks, log-det divergence.

Per body, the 4×4 pseudo-inertia (linear in the 10 parameters ``[m, hx, hy, hz, Ixx, Ixy, Ixz,
Iyy, Iyz, Izz]``, inertia about the body origin)

    J = [[Σ, h], [hᵀ, m]],   Σ = ½ tr(I) 1 − I,

is positive definite exactly when the body is physically consistent (positive mass, inertia
satisfying the strict triangle inequalities about the CoM) — constrained-IV seed eqs. 17–18;
Wensing, Kim & Slotine, IEEE RA-L 3(1), 2018. The log-det (Bregman) divergence
``D(J‖J₀) = −log det J + log det J₀ + tr(J₀⁻¹ J) − 4`` is invariant to frame changes and units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel

__all__ = [
    "PSEUDO_INERTIA_BASIS",
    "BodyConsistency",
    "ConsistencyReport",
    "body_params_from_pseudo_inertia",
    "check_consistency",
    "logdet_divergence",
    "model_divergence",
    "pseudo_inertia",
]


def _basis() -> np.ndarray:
    """``E (10, 4, 4)`` with ``J = Σ_n θ_n E_n`` (Σ = ½ tr(I) 1 − I written out entry by entry)."""
    e = np.zeros((10, 4, 4))
    e[0, 3, 3] = 1.0
    for k in range(3):
        e[1 + k, k, 3] = e[1 + k, 3, k] = 1.0
    e[4, :3, :3] = np.diag([-0.5, 0.5, 0.5])  # Ixx
    e[7, :3, :3] = np.diag([0.5, -0.5, 0.5])  # Iyy
    e[9, :3, :3] = np.diag([0.5, 0.5, -0.5])  # Izz
    for n, (i, j) in ((5, (0, 1)), (6, (0, 2)), (8, (1, 2))):  # Ixy, Ixz, Iyz
        e[n, i, j] = e[n, j, i] = -1.0
    return e


#: ``(10, 4, 4)``: the pseudo-inertia of a parameter vector is ``Σ_n θ_n E_n``.
PSEUDO_INERTIA_BASIS = _basis()


def pseudo_inertia(phi: np.ndarray) -> np.ndarray:
    """Pseudo-inertia ``(..., 4, 4)`` of one or many bodies' parameters ``(..., 10)``."""
    phi = np.asarray(phi, dtype=float)
    if phi.shape[-1] != 10:
        raise SysIdError(f"expected body parameters of shape (..., 10), got {phi.shape}")
    return np.tensordot(phi, PSEUDO_INERTIA_BASIS, axes=1)


def body_params_from_pseudo_inertia(j: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pseudo_inertia`: ``(..., 4, 4) -> (..., 10)``."""
    j = np.asarray(j, dtype=float)
    sigma = j[..., :3, :3]
    inertia = np.trace(sigma, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - sigma
    return np.concatenate(
        (j[..., 3, 3, None], j[..., :3, 3],
         np.stack([inertia[..., 0, 0], inertia[..., 0, 1], inertia[..., 0, 2], inertia[..., 1, 1],
                   inertia[..., 1, 2], inertia[..., 2, 2]], axis=-1)), axis=-1)


def logdet_divergence(phi: np.ndarray, phi_ref: np.ndarray) -> float:
    """``D(J(φ)‖J(φ_ref))``: log-det divergence of an estimate from a reference body (≥ 0).

    Returns ``inf`` when the estimate is not physically consistent; raises
    :class:`SysIdError` when the reference is not (the divergence is then undefined).
    """
    return float(_divergences(np.asarray(phi, dtype=float)[None], np.asarray(phi_ref, dtype=float)[None])[0])


def _divergences(phi: np.ndarray, phi_ref: np.ndarray) -> np.ndarray:
    """:func:`logdet_divergence` of ``B`` bodies at once: ``phi, phi_ref (B, 10) -> (B,)``."""
    j, j0 = pseudo_inertia(phi), pseudo_inertia(phi_ref)
    sign0, logdet0 = np.linalg.slogdet(j0)
    if np.any(sign0 <= 0) or np.any(rla.eigvalsh(j0)[:, 0] <= 0):
        raise SysIdError("the reference parameters are not physically consistent (J not ≻ 0)")
    sign, logdet = np.linalg.slogdet(j)
    trace = np.trace(np.linalg.solve(j0, j), axis1=1, axis2=2)
    bad = (sign <= 0) | (rla.eigvalsh(j)[:, 0] <= 0)
    return np.where(bad, np.inf, -logdet + logdet0 + trace - 4.0)


def model_divergence(model: RobotModel, theta: np.ndarray, theta_ref: np.ndarray) -> float:
    """Sum over the model's bodies of :func:`logdet_divergence` of ``theta`` from ``theta_ref``."""
    theta, theta_ref = model.check_theta(theta), model.check_theta(theta_ref)
    if not model.param_bodies:
        return 0.0
    rows = np.array([np.arange(model.body_slice(b).start, model.body_slice(b).stop)
                     for b in model.param_bodies])
    return float(np.sum(_divergences(theta[rows], theta_ref[rows])))


@dataclass(frozen=True)
class BodyConsistency:
    """Consistency of one body: the smallest eigenvalue of J [kg·m²-ish units, SI]."""

    body: str
    min_eigenvalue: float
    consistent: bool


@dataclass(frozen=True)
class ConsistencyReport:
    """Per-body pseudo-inertia check and joint-term signs of one parameter vector."""

    bodies: tuple[BodyConsistency, ...]
    negative_joint_terms: tuple[str, ...]

    @property
    def consistent(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> tuple[str, ...]:
        """What is not consistent: bodies whose J is not ≻ 0, then joint terms below 0 (empty
        exactly when :attr:`consistent`; reports name these, never an empty list)."""
        return tuple(b.body for b in self.bodies if not b.consistent) + tuple(self.negative_joint_terms)

    def as_dict(self) -> dict:
        return {
            "consistent": self.consistent,
            "bodies": {b.body: {"min_eigenvalue": b.min_eigenvalue, "consistent": b.consistent}
                       for b in self.bodies},
            "negative_joint_terms": list(self.negative_joint_terms),
        }


def check_consistency(model: RobotModel, theta: np.ndarray, *,
                      tol: float = 0.0) -> ConsistencyReport:
    """Check ``J(φ_b) ≻ tol`` per body and Fc, Fv, Ia ≥ 0 per joint (Fo may have any sign)."""
    theta = model.check_theta(theta)
    bodies = []
    for b in model.param_bodies:
        lam = float(rla.eigvalsh(pseudo_inertia(theta[model.body_slice(b)]))[0])
        bodies.append(BodyConsistency(model.body_name(b), lam, lam > tol))
    joint_names = model.param_names[model.n_body_params:]
    negative = tuple(name for name, value in zip(joint_names, theta[model.n_body_params:], strict=True)
                     if not name.endswith(".Fo") and value < 0)
    return ConsistencyReport(tuple(bodies), negative)


def realizable_inertia(inertia: np.ndarray, *, floor: float = 1e-9) -> np.ndarray:
    """A rotational inertia ``(3, 3)`` [kg·m²] a rigid body can have, closest in its principal
    moments (to simulate or export an estimate: IV instruments, identified MJCFs): moments at
    least ``floor`` and satisfying the triangle inequalities (each at most the sum of the other
    two), same principal axes."""
    moments, axes = rla.eigh(0.5 * (inertia + inertia.T))
    moments = np.maximum(moments, floor)
    for _ in range(3):
        for i in range(3):
            others = moments.sum() - moments[i]
            moments[i] = min(moments[i], others * (1 - 1e-9))
    return axes @ np.diag(moments) @ axes.T
