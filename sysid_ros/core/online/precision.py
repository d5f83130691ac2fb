"""How precisely the data determine an estimate: one relative standard deviation per direction.

From the estimate ``θ (p,)`` and the data's information ``Ω (p, p)`` (``Σ Aᵀ W A`` over the rows,
the prior's term left out: what the data alone determine). Variances come from Ω restricted to
the base parameters; a direction the data have not determined yet (Ω singular there) has an
infinite standard deviation — never the zero a pseudo-inverse would give it:

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


def _variances(omega: np.ndarray, jac: np.ndarray) -> np.ndarray:
    """Diagonal ``(d,)`` of ``J Ω⁻¹ Jᵀ`` for ``jac (d, k)`` and information ``omega (k, k)``, inf
    for a row of ``J`` reaching into Ω's (numerical) null space (eigenvalues ≤ 1e-10 · the
    largest)."""
    w, v = rla.eigh(0.5 * (omega + omega.T))
    top = float(w[-1]) if w.size else 0.0
    good = w > max(1e-10 * top, 1e-300)
    proj = jac @ v  # (d, k): each row in the eigenbasis
    var = (proj[:, good] ** 2 / w[good]).sum(axis=1)
    lost = (proj[:, ~good] ** 2).sum(axis=1)
    scale = (jac**2).sum(axis=1)
    var[lost > 1e-12 * np.maximum(scale, 1e-300)] = np.inf
    return var


def estimate_precision(target: Target, theta: np.ndarray, information: np.ndarray, *,
                       inertia_required: bool = False) -> Precision:
    """The :class:`Precision` of ``theta (p,)`` for ``target`` from the data's ``information
    (p, p)`` (see the module docstring). Information with a NaN (no data yet) gives NaN."""
    theta = np.asarray(theta, dtype=float)
    omega = np.asarray(information, dtype=float)
    p = target.n_params
    if theta.shape != (p,) or omega.shape != (p, p):
        raise DataError(f"expected theta ({p},) and information ({p}, {p}), got {theta.shape}, {omega.shape}")
    # the base parameters β are the independent columns: Y θ = Y_b β, so their information is
    # Ω's block on those columns
    idx = np.asarray(target.base.independent, dtype=int)
    omega_b = omega[np.ix_(idx, idx)]
    finite = bool(np.all(np.isfinite(omega_b)))
    if target.kind == "payload":
        return _payload_precision(theta, omega_b, idx, finite, inertia_required)
    b = target.base.matrix
    beta = b @ theta
    std = np.sqrt(_variances(omega_b, np.eye(idx.size))) if finite else np.full(idx.size, np.nan)
    scale = np.maximum(np.abs(beta), np.abs(b @ target.prior))
    with np.errstate(invalid="ignore"):
        rel = np.divide(std, scale, out=std.copy(), where=scale > 0)
    names = tuple(f"base.{i}: {n}" for i, n in enumerate(target.base.names))
    return Precision(names, beta, std, rel, np.ones(len(names), dtype=bool))


def _payload_precision(theta: np.ndarray, omega_b: np.ndarray, idx: np.ndarray, finite: bool,
                       inertia_required: bool) -> Precision:
    names = ("payload.m", *(f"payload.com.{a}" for a in "xyz"),
             *(f"payload.inertia.{n}" for n in INERTIA_NAMES))
    required = np.array([True] * 4 + [inertia_required] * 6)
    if not theta[0] > 0 or not finite:
        nan = np.full(10, np.nan)
        return Precision(names, nan, nan.copy(), nan.copy(), required)
    x, jac = payload_jacobian(theta)
    # a payload's 10 parameters are its base parameters unless the arm's kinematics hide some
    # (then they lie in no identified direction: infinite); β = θ[idx]
    full = np.zeros((10, 10))
    full[np.ix_(idx, idx)] = omega_b
    std = np.sqrt(_variances(full, jac))
    com_scale = max(float(np.linalg.norm(x[1:4])), COM_SCALE)
    moments = rla.eigvalsh(inertia_vec_to_mat(x[4:10]))
    inertia_scale = max(float(np.max(np.abs(moments))), 1e-12)
    scale = np.concatenate(([x[0]], np.full(3, com_scale), np.full(6, inertia_scale)))
    return Precision(names, x, std, std / scale, required)
