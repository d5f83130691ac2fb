"""How precisely the data determine an estimate: one relative standard deviation per direction.

From the estimate ``θ (p,)`` and its covariance ``Σ (p, p)`` (the estimator's ``P``, or the
pseudo-inverse of the data's information Ω, the prior's term left out):

* an **arm** target: one direction per base parameter ``β = B θ`` (:class:`BaseParameters`),
  ``σ_β = √diag(B Σ Bᵀ)``, relative to ``max(|β̂|, |β_prior|)`` (a base parameter near zero in
  the estimate and in the prior is measured against the larger of the two, so it does not read as
  infinitely imprecise when the prior says it is small; both zero: ``σ`` itself);
* a **payload** target (10 parameters ``[m, h, I_origin]``): ``payload.m`` (``σ_m / m``),
  ``payload.com.{x,y,z}`` (``σ_c`` of ``c = h / m`` by first-order propagation, relative to
  ``max(‖c‖, COM_SCALE)``) and ``payload.inertia.{xx,xy,xz,yy,yz,zz}`` (σ of the inertia about
  the CoM, propagated the same way, relative to its largest principal moment).

``required``: the directions ``until_precision`` waits for — every base direction of an arm;
mass and CoM of a payload (what a UR controller's ``set_payload`` takes), plus the inertia when
asked (what a Franka's ``setLoad`` also takes; for a small payload it is rarely determined).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.spatial import inertia_mat_to_vec, inertia_vec_to_mat
from sysid_ros.core.model.target import Target

__all__ = ["COM_SCALE", "INERTIA_NAMES", "Precision", "estimate_precision", "payload_jacobian"]

#: [m] the CoM's σ is relative to the CoM's distance from the body origin, at least this
COM_SCALE = 0.05
INERTIA_NAMES = ("xx", "xy", "xz", "yy", "yz", "zz")


@dataclass(frozen=True)
class Precision:
    """``names (d,)`` of the directions, their ``values (d,)`` (SI units), ``std (d,)`` (same
    units), ``relative_std (d,)`` (dimensionless, NaN before any data) and ``required (d,)``:
    whether ``until_precision`` waits for the direction."""

    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray
    relative_std: np.ndarray
    required: np.ndarray

    def reached(self, target: float) -> bool:
        """Every required direction's relative std at or below ``target`` (False while any is NaN)."""
        rel = self.relative_std[self.required]
        return bool(rel.size) and bool(np.all(rel <= target))

    def poorly_determined(self, target: float) -> list[str]:
        """Required directions whose relative std is above ``target`` (or unknown)."""
        return [n for n, r, q in zip(self.names, self.relative_std, self.required, strict=True)
                if q and not r <= target]

    def worst(self) -> tuple[str, float]:
        """The required direction with the largest relative std (``("", nan)`` without one)."""
        rel = np.where(self.required, self.relative_std, -np.inf)
        if not self.required.any():
            return "", math.nan
        i = int(np.nanargmax(np.where(np.isnan(rel), np.inf, rel)))
        return self.names[i], float(self.relative_std[i])


def payload_jacobian(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x (10,), J (10, 10))``: ``x = [m, c (3,), I_c (6,)]`` (mass, CoM, inertia about the CoM
    in :data:`INERTIA_NAMES` order) of a payload's ``θ = [m, h, I_origin]`` and ``J = ∂x/∂θ``
    (``c = h/m``, ``I_c = I_o − (hᵀh/m) 1 + h hᵀ/m``). Needs ``m > 0``."""
    theta = np.asarray(theta, dtype=float)
    m, h = float(theta[0]), theta[1:4]
    if not m > 0:
        raise DataError(f"a payload's precision needs a positive mass, got m={m!r}")
    c = h / m
    i_c = inertia_vec_to_mat(theta[4:10]) - (h @ h / m) * np.eye(3) + np.outer(h, h) / m
    x = np.concatenate(([m], c, inertia_mat_to_vec(i_c)))
    jac = np.zeros((10, 10))
    jac[0, 0] = 1.0
    jac[1:4, 0] = -h / m**2
    jac[1:4, 1:4] = np.eye(3) / m
    jac[4:10, 4:10] = np.eye(6)
    # shift term S(h, m) = −(hᵀh/m) 1 + h hᵀ/m, differentiated per component
    for k, (a, b) in enumerate(((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))):
        delta = 1.0 if a == b else 0.0
        jac[4 + k, 0] = (h @ h / m**2) * delta - h[a] * h[b] / m**2
        for j in range(3):
            cross = (h[b] if j == a else 0.0) + (h[a] if j == b else 0.0)
            jac[4 + k, 1 + j] = -2.0 * h[j] / m * delta + cross / m
    return x, jac


def estimate_precision(target: Target, theta: np.ndarray, covariance: np.ndarray, *,
                       inertia_required: bool = False) -> Precision:
    """The :class:`Precision` of ``theta (p,)`` with ``covariance (p, p)`` for ``target``
    (see the module docstring). A covariance with NaN (no data yet) gives NaN precisions."""
    theta = np.asarray(theta, dtype=float)
    cov = np.asarray(covariance, dtype=float)
    p = target.n_params
    if theta.shape != (p,) or cov.shape != (p, p):
        raise DataError(f"expected theta ({p},) and covariance ({p}, {p}), got {theta.shape}, {cov.shape}")
    if target.kind == "payload":
        return _payload_precision(theta, cov, inertia_required)
    b = target.base.matrix
    beta = b @ theta
    std = np.sqrt(np.maximum(np.diag(b @ cov @ b.T), 0.0))
    scale = np.maximum(np.abs(beta), np.abs(b @ target.prior))
    rel = np.divide(std, scale, out=std.copy(), where=scale > 0)
    names = tuple(f"base.{i}: {n}" for i, n in enumerate(target.base.names))
    return Precision(names, beta, std, rel, np.ones(len(names), dtype=bool))


def _payload_precision(theta: np.ndarray, cov: np.ndarray, inertia_required: bool) -> Precision:
    names = ("payload.m", *(f"payload.com.{a}" for a in "xyz"),
             *(f"payload.inertia.{n}" for n in INERTIA_NAMES))
    required = np.array([True] * 4 + [inertia_required] * 6)
    if not theta[0] > 0 or not np.all(np.isfinite(cov)):
        nan = np.full(10, np.nan)
        return Precision(names, nan, nan.copy(), nan.copy(), required)
    x, jac = payload_jacobian(theta)
    std = np.sqrt(np.maximum(np.diag(jac @ cov @ jac.T), 0.0))
    com_scale = max(float(np.linalg.norm(x[1:4])), COM_SCALE)
    moments = rla.eigvalsh(inertia_vec_to_mat(x[4:10]))
    inertia_scale = max(float(np.max(np.abs(moments))), 1e-12)
    scale = np.concatenate(([x[0]], np.full(3, com_scale), np.full(6, inertia_scale)))
    return Precision(names, x, std, std / scale, required)
