"""Instrumental-variable estimation (constrained-IV seed §II-E, §III).

With the filtered observation matrix ``X (r, n_b)`` (base columns), torques ``y (r,)`` and
instruments ``Z (r, n_b)`` built from a simulation of the robot with the previous estimate:

* IDIM-IV (eq. 12): ``β = (Zᵀ X)⁻¹ Zᵀ y``;
* PC-IDIM-IV (eqs. 28–29 with the LMIs of eq. 19 on the standard parameters, equivalent per §IV-D):
  ``min ½‖P_Z (y − X B θ)‖²`` subject to physical consistency, ``β = B θ``;
* covariance (eq. 42): ``Σ = (X̂ᵀ Ω̂⁻¹ X̂)⁻¹`` with ``X̂ = P_Z X`` and ``Ω̂ = diag(σ_j²)`` from
  the per-joint residuals;
* convergence (eq. 46): ``max_i |β_i⁽ᵏ⁾ − β_i⁽ᵏ⁻¹⁾| / |β_i⁽ᵏ⁾| < tol``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg

from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.target import Target

if TYPE_CHECKING:  # cvxpy is imported by the constrained step only
    from sysid_ros.core.batch.convex import ConvexSolution


@dataclass(frozen=True)
class IVStep:
    """One IV solve: the estimate, and the instruments' quality figures."""

    beta: np.ndarray
    theta: np.ndarray | None
    gradient_norm: float  # ‖Zᵀ(y − Xβ)‖ / ‖Zᵀy‖, ~0 unless constraints bind
    pi_rank: int  # rank of Π̂ = (ZᵀZ)⁻¹ZᵀX (eq. 22): must equal n_b
    solution: ConvexSolution | None


def iv_step(x: np.ndarray, z: np.ndarray, y: np.ndarray, *, target: Target | None = None,
            b_matrix: np.ndarray | None = None) -> IVStep:
    """One IDIM-IV (``target`` None) or PC-IDIM-IV step on base columns ``x``, ``z`` ``(r, n_b)``.

    For PC-IDIM-IV, ``b_matrix (n_b, p)`` maps standard to base parameters.
    """
    scale = np.linalg.norm(x, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    xs, zs = x / scale, z / np.maximum(np.linalg.norm(z, axis=0), 1e-300)
    qz, rz = scipy.linalg.qr(zs, mode="economic")
    pi = scipy.linalg.solve_triangular(rz, qz.T @ xs)
    sv = np.linalg.svd(pi, compute_uv=False)
    pi_rank = int(np.sum(sv > 1e-9 * sv[0])) if sv.size else 0
    if pi_rank < x.shape[1]:
        raise IdentificationError(f"the instruments are not correlated with the regressor: rank of "
                                  f"Π̂ is {pi_rank} < {x.shape[1]} (eq. 25); excitation too poor?")
    solution = None
    theta = None
    if target is None:
        beta = np.linalg.solve(zs.T @ xs, zs.T @ y) / scale
    else:
        assert b_matrix is not None
        from sysid_ros.core.batch.convex import least_squares_program

        # ½‖P_Z(y − XBθ)‖² = ½‖Q_Zᵀ(y − XBθ)‖² + const
        solution = least_squares_program(target, qz.T @ (x @ b_matrix), qz.T @ y)
        theta = solution.theta
        beta = b_matrix @ theta
    grad = np.linalg.norm(zs.T @ (y - x @ beta)) / max(np.linalg.norm(zs.T @ y), 1e-300)
    return IVStep(beta, theta, float(grad), pi_rank, solution)


def iv_covariance(x: np.ndarray, z: np.ndarray, residual: np.ndarray, joint: np.ndarray,
                  n_joints: int) -> np.ndarray:
    """Eq. 42: ``(X̂ᵀ Ω̂⁻¹ X̂)⁻¹`` with ``X̂ = P_Z X``, ``σ_j²`` from the residuals of joint j."""
    qz, _ = scipy.linalg.qr(z, mode="economic")
    x_hat = qz @ (qz.T @ x)
    var = np.array([np.mean(residual[joint == j] ** 2) if np.any(joint == j) else 1.0
                    for j in range(n_joints)])
    w = 1.0 / np.maximum(var[joint], 1e-300)
    info = x_hat.T @ (x_hat * w[:, None])
    return np.linalg.pinv(info)


def converged(beta: np.ndarray, previous: np.ndarray, tol: float) -> tuple[bool, float]:
    """Eq. 46 with a floor (1e-6 of the largest |β|) so that zero parameters do not divide by 0."""
    floor = 1e-6 * max(float(np.max(np.abs(beta))), 1e-300)
    change = float(np.max(np.abs(beta - previous) / np.maximum(np.abs(beta), floor)))
    return change < tol, change
