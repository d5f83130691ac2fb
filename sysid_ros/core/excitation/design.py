"""Optimal excitation: Fourier coefficients that minimise the condition number of the base
regressor under the joint and motor limits (overview seed: excitation design, Swevers et al.).

The decision variables are the unscaled coefficients ``a, b (nv, L)``. Every candidate is first
fitted inside the limits (:meth:`FourierTrajectory.fit_to` scales each joint down, never up), so
every iterate is feasible by construction and the optimiser (scipy's L-BFGS-B on
``log cond``) never sees a constraint. The regressor is evaluated on a grid over one period; the
gradient comes from one batched regressor call over all perturbed coefficients and one SVD.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel

if TYPE_CHECKING:
    from sysid_ros.core.model.base_params import BaseParameters

__all__ = ["ExcitationDesign", "choose_excitation", "coefficients_from_file", "condition_number",
           "optimize_excitation"]


def condition_number(model: RobotModel, trajectory: FourierTrajectory, *,
                     base: BaseParameters | None = None, n_samples: int = 200) -> float:
    """Condition number (2-norm) of the stacked base regressor ``(n_samples·nv, r)`` over one
    period of ``trajectory`` (uniform grid)."""
    from sysid_ros.core import linalg as rla  # scipy.linalg: only when used (a node's start-up)
    from sysid_ros.core.model.base_params import base_parameters

    base = base or base_parameters(model)
    t = np.linspace(0.0, trajectory.period, n_samples, endpoint=False)
    q, dq, ddq = trajectory.evaluate(t)
    from sysid_ros.core.model.regressor import torque_regressor  # (compiled kernels: when designing)

    w = base.columns(torque_regressor(model, q, dq, ddq)).reshape(-1, base.rank)
    s = rla.svdvals(w)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


@dataclass(frozen=True)
class ExcitationDesign:
    """Result of :func:`optimize_excitation`: the fitted ``trajectory``, its condition number,
    that of the random starting set, iterations, function evaluations and wall time [s]."""

    trajectory: FourierTrajectory
    condition_number: float
    initial_condition_number: float
    iterations: int
    evaluations: int
    solve_time: float
    message: str


def optimize_excitation(model: RobotModel, limits: Limits | None = None, *, harmonics: int = 5,
                        period: float = 10.0, seed: int = 0, n_samples: int = 120,
                        max_iterations: int = 60, margin: float = 0.1,
                        q0: np.ndarray | None = None) -> ExcitationDesign:
    """Coefficients minimising the base regressor's condition number under ``limits`` (default
    :meth:`Limits.of`), started from :meth:`FourierTrajectory.random` with ``seed``."""
    import scipy.optimize  # only here: seconds of a node's start-up on a busy host otherwise

    from sysid_ros.core import linalg as rla
    from sysid_ros.core.model.base_params import base_parameters

    limits = limits or Limits.of(model)
    base = base_parameters(model)
    start = FourierTrajectory.random(limits, harmonics=harmonics, period=period, seed=seed, q0=q0,
                                     margin=margin)
    shape = start.a.shape
    t = np.linspace(0.0, period, n_samples, endpoint=False)

    def fitted(x: np.ndarray) -> FourierTrajectory:
        a, b = x[: x.size // 2].reshape(shape), x[x.size // 2:].reshape(shape)
        return FourierTrajectory(start.q0, a, b, period).fit_to(limits, margin=margin)

    def stacked(xs: np.ndarray) -> np.ndarray:
        """Base regressors ``(len(xs), n_samples·nv, r)`` of the fitted candidates ``xs``, from one
        batched regressor call."""
        motion = [fitted(x).evaluate(t) for x in xs]
        q, dq, ddq = (np.concatenate([m[i] for m in motion]) for i in range(3))
        from sysid_ros.core.model.regressor import torque_regressor

        return base.columns(torque_regressor(model, q, dq, ddq)).reshape(len(xs), -1, base.rank)

    def objective_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        """``log cond W`` and its gradient: forward differences of the regressor (every
        perturbed candidate in the same batched call, as scipy's ``eps`` steps), projected on
        the extreme singular vectors (d σ_i = u_iᵀ dW v_i) instead of one SVD per coefficient."""
        w = stacked(np.vstack((x, x + step * np.eye(x.size))))
        u, s, vt = rla.svd(w[0])
        if s[-1] <= 0:
            return float("inf"), np.zeros_like(x)
        dw = (w[1:] - w[0]) / step  # (n, m, r)
        grad = (u[:, 0] @ dw @ vt[0]) / s[0] - (u[:, -1] @ dw @ vt[-1]) / s[-1]
        return float(np.log(s[0] / s[-1])), grad

    step = 1e-5
    x0 = np.concatenate([start.a.ravel(), start.b.ravel()])
    began = time.perf_counter()
    initial = condition_number(model, fitted(x0), base=base, n_samples=n_samples)
    res = scipy.optimize.minimize(objective_and_gradient, x0, jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iterations})
    if not np.all(np.isfinite(res.x)):
        raise SysIdError(f"excitation optimisation failed: {res.message}")
    best = fitted(res.x)
    return ExcitationDesign(best, condition_number(model, best, base=base), initial, int(res.nit),
                            int(res.nfev), time.perf_counter() - began, str(res.message))


def coefficients_from_file(path: str, limits: Limits, *, margin: float = 0.1) -> FourierTrajectory:
    """Fourier coefficients from JSON ``{"q0": [...], "a": [[...]], "b": [[...]], "period": s}``
    (the ``trajectory`` block of a simulated bag's truth.json has this form), fitted inside
    ``limits``."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
        doc = doc.get("trajectory", doc)
        traj = FourierTrajectory(np.asarray(doc["q0"], dtype=float), np.asarray(doc["a"], dtype=float),
                                 np.asarray(doc["b"], dtype=float), float(doc["period"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SysIdError(f"coefficients file {path}: expected JSON with q0, a, b, period ({exc})") from None
    if traj.q0.shape != limits.lower.shape:
        raise SysIdError(f"coefficients file {path}: {traj.q0.size} joints, the robot has "
                         f"{limits.lower.size}")
    return traj.fit_to(limits, margin=margin)


def choose_excitation(model: RobotModel, limits: Limits, *, coefficients_file: str = "",
                      optimize: bool = False, harmonics: int = 5, period: float = 10.0, seed: int = 0,
                      q0: np.ndarray | None = None, margin: float = 0.1,
                      say: Callable[[str], None] | None = None) -> FourierTrajectory:
    """The excitation a user asked for: coefficients from a file, optimised for the condition
    number, or random from ``seed`` — always fitted inside ``limits``. ``say`` reports the
    optimisation."""
    if coefficients_file:
        return coefficients_from_file(coefficients_file, limits, margin=margin)
    if optimize:
        if say:
            say("optimising the excitation for the base regressor's condition number ...")
        design = optimize_excitation(model, limits, harmonics=harmonics, period=period, seed=seed,
                                     margin=margin, q0=q0)
        if say:
            say(f"condition number {design.initial_condition_number:.1f} (random start) -> "
                f"{design.condition_number:.1f} ({design.evaluations} evaluations, "
                f"{design.solve_time:.1f} s)")
        return design.trajectory
    return FourierTrajectory.random(limits, harmonics=harmonics, period=period, seed=seed, q0=q0,
                                    margin=margin)
