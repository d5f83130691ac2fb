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

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.least_squares import RANK_TOLERANCE
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
    pi_rank: int  # rank of Π̂ = (ZᵀZ)⁻¹ZᵀX (eq. 22): must equal the regressor's rank (n_b)
    solution: ConvexSolution | None


def regressor_rank(x: np.ndarray) -> int:
    """Numerical rank of ``x (r, n_b)`` with its columns scaled to unit norm, at
    :data:`RANK_TOLERANCE` of the largest singular value."""
    xs, _ = _unit_columns(x)
    sv_x = rla.svdvals(xs)
    return int(np.sum(sv_x > RANK_TOLERANCE * sv_x[0])) if sv_x.size else 0


def _unit_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.linalg.norm(x, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return x / scale, scale


def iv_step(x: np.ndarray, z: np.ndarray, y: np.ndarray, *, target: Target | None = None,
            b_matrix: np.ndarray | None = None, x_rank: int | None = None) -> IVStep:
    """One IDIM-IV (``target`` None) or PC-IDIM-IV step on base columns ``x``, ``z`` ``(r, n_b)``.

    For PC-IDIM-IV, ``b_matrix (n_b, p)`` maps standard to base parameters. ``x_rank``:
    :func:`regressor_rank` of ``x`` when the caller has it (x is the same at every iteration;
    an SVD of the whole regressor per iteration saved).
    """
    xs, scale = _unit_columns(x)
    zs = z / np.maximum(np.linalg.norm(z, axis=0), 1e-300)
    # orthonormal basis of what the instruments span (combinations the data cannot separate, e.g.
    # a one-way joint's Coulomb friction and offset, leave both X and Z rank-deficient alike)
    uz, svz, _ = rla.svd(zs)
    qz = uz[:, svz > RANK_TOLERANCE * svz[0]] if svz.size else uz
    if x_rank is None:
        x_rank = regressor_rank(x)
    sv = rla.svdvals(qz.T @ xs)
    pi_rank = int(np.sum(sv > 1e-9 * sv[0])) if sv.size else 0
    if pi_rank < x_rank:
        raise IdentificationError(f"the instruments are not correlated with the regressor: rank of "
                                  f"Π̂ is {pi_rank} < {x_rank}, the regressor's (eq. 25); excitation "
                                  "too poor?")
    solution = None
    theta = None
    if target is None:
        # 2SLS (= eq. 12 when Z and X have full rank): min ‖P_Z (y − X β)‖, minimum norm
        beta = rla.lstsq(qz.T @ xs, qz.T @ y) / scale
    else:
        assert b_matrix is not None
        from sysid_ros.core.batch.convex import least_squares_program

        # ½‖P_Z(y − XBθ)‖² = ½‖Q_Zᵀ(y − XBθ)‖² + const
        # the residual outside the instruments' span as one more (constant) row: the program's
        # residual, which scales its pull toward the nominal model, is then the data's noise level
        outside = float(np.sqrt(max(float(y @ y) - float(np.sum((qz.T @ y) ** 2)), 0.0)))
        rows = np.vstack([qz.T @ (x @ b_matrix), np.zeros((1, b_matrix.shape[1]))])
        solution = least_squares_program(target, rows, np.append(qz.T @ y, outside))
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
    return rla.pinv(info)


def converged(beta: np.ndarray, previous: np.ndarray, tol: float) -> tuple[bool, float]:
    """Eq. 46 with a floor (1e-6 of the largest |β|) so that zero parameters do not divide by 0."""
    floor = 1e-6 * max(float(np.max(np.abs(beta))), 1e-300)
    change = float(np.max(np.abs(beta - previous) / np.maximum(np.abs(beta), floor)))
    return change < tol, change
