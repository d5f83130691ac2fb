"""An online estimate of base parameters projected onto the physically consistent, plausible set
in the metric of the filter's own posterior (estimate projection: Simon & Chia, "Kalman filtering
with state equality constraints", IEEE TAES 38, 2002; with inequality constraints in Simon,
"Kalman filtering with state constraints: a survey", IET CTA 4(8), 2010).

A filter on base parameters (the EKF: ``β̂ (r,)`` with covariance ``P_β (r, r)``, started from the
prior ``β₀ = B θ₀`` with standard deviations ``INITIAL_STD · s``, :mod:`~.drift`) reports the
standard vector ``θ̂ = θ₀ + G (β̂ − B θ₀)`` (:func:`~sysid_ros.core.online.drift.base_to_standard`),
which need not be physically consistent or plausible. What is exported is instead::

    θ* = argmin_θ  (B θ − β̂)ᵀ P_β⁻¹ (B θ − β̂)  +  ‖Nᵀ (θ − θ₀) ⊘ s‖² / INITIAL_STD²
         subject to the target's feasible set (:class:`~sysid_ros.core.batch.convex.ConvexProgram`:
         J(φ_b) ⪰ ε I per body, friction and rotor inertia ≥ 0, the plausibility bounds)

with ``N`` an orthonormal basis of the null space of ``B diag(s)`` (``s``:
:func:`~sysid_ros.core.online.drift.parameter_scale`; :meth:`ConvexProgram.tie_break`): the first
term is the Mahalanobis distance of the base parameters, the second that of the directions no
measurement sees, which keep the prior ``θ ~ N(θ₀, (INITIAL_STD·s)²)`` (the filter's prior on β is
its image, off-diagonal terms dropped; in the scaled coordinates ``θ ⊘ s`` it is isotropic, so its
null-space part is independent of ``β`` and never updated). ``θ*`` is then the most probable
feasible ``θ`` under the filter's Gaussian posterior; the minimum is over every standard
vector, so a consistent ``θ`` with the same base parameters costs only its unidentifiable
directions' move. ``θ̂`` has no null-space part (``G`` lifts in the same metric), so a feasible
``θ̂`` is its own projection: it is returned as it is, without a solve. The program is compiled
once per target (cvxpy parameters for ``P_β^{-½}`` and ``P_β^{-½} β̂``), so a
projection is one Clarabel solve.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import cvxpy as cp
import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.convex import ConvexProgram
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.json_numbers import json_number as _num
from sysid_ros.core.model.target import Plausibility, Target
from sysid_ros.core.online.drift import INITIAL_STD, parameter_scale

__all__ = ["PROJECTED", "ConsistentProjection", "Projection"]

#: ``parameters_from`` of an exported estimate the projection changed
PROJECTED = "the filter's estimate projected onto the consistent, plausible set (its posterior's metric)"
#: a body or joint term counts as moved when a parameter changed by more than this fraction of
#: its scale
MOVED = 1e-4
#: eigenvalues of P_β below this fraction of the largest are raised to it (a direction the filter
#: knows exactly still has a finite weight)
COVARIANCE_FLOOR = 1e-14


@dataclass(frozen=True)
class Projection:
    """``theta (p,)``: the exported (projected) standard parameters; ``raw (p,)``: the filter's
    own; ``distance``: the Mahalanobis distance between them under the filter's posterior (the
    square root of the module's objective; dimensionless, 0 when nothing moved),
    ``base_distance`` its base parameters' part ``√((Bθ − β̂)ᵀ P_β⁻¹ (Bθ − β̂))``; ``moved``:
    bodies (by label) and other parameters (by name) that changed by more than :data:`MOVED` of
    their scale, with the largest relative change; ``violated``: the constraints the raw estimate
    broke; ``binding``: those shaping the projection (non-zero multiplier); ``status``:
    ``"unchanged"`` (the raw estimate was feasible), the solver's status, or ``"failed: ..."``
    (``theta`` is then the raw estimate); ``solve_time`` [s]."""

    theta: np.ndarray
    raw: np.ndarray
    distance: float = 0.0
    base_distance: float = 0.0
    moved: dict[str, float] = field(default_factory=dict)
    violated: tuple[str, ...] = ()
    binding: tuple[str, ...] = ()
    status: str = "unchanged"
    solve_time: float = 0.0

    @property
    def solved(self) -> bool:
        """The raw estimate was infeasible and the program found its projection."""
        return self.status != "unchanged" and not self.status.startswith("failed")

    def as_dict(self) -> dict:
        """For ``result.json`` and the estimate's diagnostics."""
        return {"mahalanobis_distance": _num(self.distance), "base_distance": _num(self.base_distance),
                "moved": {k: float(v) for k, v in self.moved.items()},
                "violated_by_raw_estimate": list(self.violated), "binding": list(self.binding),
                "status": self.status, "solve_time_s": float(self.solve_time)}


class ConsistentProjection:
    """The projection of :mod:`this module <sysid_ros.core.online.projection>` for ``target``
    (an arm without plausibility bounds gets the default :class:`Plausibility`, as the MHE does)
    and the filter's ``prior (p,)`` (default the target's), its program built on first use and
    re-solved with new values."""

    def __init__(self, target: Target, prior: np.ndarray | None = None) -> None:
        if prior is not None:
            target = replace(target, prior=np.asarray(prior, dtype=float))
        target = Plausibility.or_default(target)
        self.target = target
        self.scale = parameter_scale(target)
        self._program: _Program | None = None

    def _build(self) -> _Program:
        if self._program is None:
            prog = ConvexProgram(self.target, scale=self.scale)
            r = self.target.base.rank
            root = cp.Parameter((r, r), name="covariance_inverse_root")
            centre = cp.Parameter(r, name="root_times_estimate")
            beta = self.target.base.matrix @ prog.theta
            null = prog.tie_break()  # ‖Nᵀ(θ − θ₀) ⊘ s‖²
            objective = cp.sum_squares(root @ beta - centre) + null / INITIAL_STD**2
            self._program = _Program(prog, root, centre, null, objective)
        return self._program

    def violated(self, theta: np.ndarray) -> tuple[str, ...]:
        """Labels of the constraints ``theta (p,)`` breaks (empty: feasible)."""
        prog = self._build().prog
        prog.theta_scaled.value = np.asarray(theta, dtype=float) / prog.scale
        return tuple(label for label, con in zip(prog.labels, prog.constraints, strict=True)
                     if float(np.max(con.violation())) > 0.0)

    def project(self, beta: np.ndarray, covariance: np.ndarray, raw: np.ndarray) -> Projection:
        """The projection of the estimate ``beta (r,)`` with ``covariance (r, r)`` (P_β), whose
        standard vector is ``raw (p,)``. A solver failure (an empty feasible set) is reported in
        ``status`` with the raw estimate kept, not raised: the caller states it is inconsistent."""
        raw = np.asarray(raw, dtype=float)
        beta = np.asarray(beta, dtype=float)
        if not (np.all(np.isfinite(raw)) and np.all(np.isfinite(beta)) and np.all(np.isfinite(covariance))):
            return Projection(raw.copy(), raw.copy(), math.nan, math.nan,
                              status="failed: the estimate or its covariance is not finite")
        violated = self.violated(raw)
        if not violated:
            return Projection(raw.copy(), raw.copy())
        p = self._build()
        lam, vec = rla.eigh(0.5 * (covariance + covariance.T))
        lam = np.maximum(lam, COVARIANCE_FLOOR * max(float(lam[-1]), 1e-300))
        p.root.value = vec.T / np.sqrt(lam)[:, None]  # P_β^{-½} (rows: Λ^{-½} Vᵀ)
        p.centre.value = p.root.value @ beta
        start = time.perf_counter()
        try:
            # Clarabel only, at its default tolerances: SCS's answers to this program break the
            # consistency margin, and the tightened tolerances end "optimal_inaccurate" on a 7-DOF
            # arm with the same solution
            sol = p.prog.solve(p.objective, solvers=("CLARABEL",))
        except IdentificationError as exc:
            return Projection(raw.copy(), raw.copy(), math.nan, math.nan, violated=violated,
                              status=f"failed: {exc}", solve_time=time.perf_counter() - start)
        theta = sol.theta
        base_sq = float(np.sum((p.root.value @ (self.target.base.matrix @ theta - beta)) ** 2))
        distance = math.sqrt(max(base_sq + float(p.null.value) / INITIAL_STD**2, 0.0))
        return Projection(theta, raw.copy(), distance, math.sqrt(base_sq), self._moved(theta - raw),
                          violated, tuple(sol.binding()), sol.status, time.perf_counter() - start)

    def _moved(self, change: np.ndarray) -> dict[str, float]:
        rel = np.abs(change) / self.scale
        out, covered = {}, np.zeros(rel.size, dtype=bool)
        for label, sl in self.target.body_blocks:
            covered[sl] = True
            if rel[sl].max() > MOVED:
                out[label] = float(rel[sl].max())
        for i in np.flatnonzero(~covered & (rel > MOVED)):
            out[self.target.names[i]] = float(rel[i])
        return out


@dataclass(frozen=True)
class _Program:
    """The compiled projection: the constraints' program and the objective's parameters."""

    prog: ConvexProgram
    root: cp.Parameter
    centre: cp.Parameter
    null: cp.Expression
    objective: cp.Expression
