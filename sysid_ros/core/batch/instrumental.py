"""The instrumental-variable methods iv and pc_iv (IDIM-IV, PC-IDIM-IV): instruments from a
closed-loop simulation of the robot with the previous estimate under the recorded reference and
gains, per segment; the iteration (eq. 46) on :mod:`~sysid_ros.core.batch.iv`'s steps."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable

import numpy as np

from sysid_ros.core.batch.iv import converged, iv_covariance, iv_step, regressor_rank
from sysid_ros.core.batch.least_squares import regression_rows
from sysid_ros.core.batch.methods import (
    PROJECTED,
    consistent_from_base,
    multipliers,
    solver_status,
    with_parameters,
)
from sysid_ros.core.batch.options import IdentifyOptions
from sysid_ros.core.batch.prepared import Prepared, PreparedSegment
from sysid_ros.core.data.controller import closed_loop_needed
from sysid_ros.core.data.preprocessing import Conditioned, lowpass
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.consistency import realizable_inertia
from sysid_ros.core.model.robot import body_params_from_inertial, inertial_from_body_params
from sysid_ros.core.model.target import Target
from sysid_ros.core.result import IdentificationResult, SolverStatus, diagnostics_for
from sysid_ros.core.sim.simulation import run_mit
from sysid_ros.core.sim.synthetic import Payload, with_payload

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------- instrumental variables
def _instruments(prep: Prepared, theta: np.ndarray) -> np.ndarray:
    """Base-column instruments ``(K, n, r)`` at the kept samples from a closed-loop simulation of
    the robot with parameters ``theta`` under the recorded reference and gains, run per segment
    (from the segment's first conditioned state, under its slice of the command log)."""
    ds = prep.dataset
    if ds.command is None or not (np.all(np.isfinite(ds.command.kp)) and np.all(np.isfinite(ds.command.kd))):
        raise DataError(closed_loop_needed(ds))
    mj = _simulation_model(prep.target, theta)
    kp, kd = ds.command.kp.max(axis=0), ds.command.kd.max(axis=0)
    return np.concatenate([_segment_instruments(prep, part, mj, kp, kd) for part in prep.segments],
                          axis=0)


def _segment_instruments(prep: Prepared, part: PreparedSegment, mj, kp: np.ndarray, kd: np.ndarray
                         ) -> np.ndarray:
    """The instruments ``(K_s, n, r)`` of one segment's kept samples (see :func:`_instruments`)."""
    ds, target, cond = part.dataset, prep.target, part.conditioned
    assert ds.command is not None
    dt = _instrument_step(mj, cond, kp, kd)
    t_sim = np.arange(ds.t[0], ds.t[-1], dt)
    cmd = ds.command.at(t_sim)
    run = run_mit(mj, cmd.q_ref, cmd.dq_ref, cmd.tau_ff, cmd.kp, cmd.kd, target.model.torque_limits(),
                  dt=dt, q0=cond.q[0], dq0=cond.dq[0])
    z_full, _ = target.regressor(run.q_true, run.dq_true, run.ddq)
    zb = target.base.columns(z_full)
    fs_sim = 1.0 / dt
    # the same parallel low-pass as X, applied at the simulation rate
    zf = lowpass(zb.reshape(len(t_sim), -1), fs_sim, prep.settings.decimation_cutoff,
                 prep.settings.order)
    # instruments at the kept sample times (linear interpolation of the filtered columns)
    t_kept = prep.t[part.rows]
    idx = np.searchsorted(t_sim, t_kept).clip(1, len(t_sim) - 1)
    w = ((t_kept - t_sim[idx - 1]) / dt).clip(0.0, 1.0)[:, None]
    z = zf[idx - 1] * (1 - w) + zf[idx] * w
    return z.reshape(len(t_kept), prep.y.shape[1], -1)


def _instrument_step(mj, cond: Conditioned, kp: np.ndarray, kd: np.ndarray) -> float:
    """Largest multiple (or, for data slower than that, largest integer fraction) of the data
    period, at most the model's time step, that keeps the explicit PD loop well resolved:
    ``dt·(kd/M_jj + √(kp/M_jj)) <= 0.3`` for every joint (inertia at the first conditioned
    sample ``cond.q[0]``)."""
    import mujoco

    data = mujoco.MjData(mj)
    data.qpos[:] = cond.q[0]
    mujoco.mj_forward(mj, data)
    full = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, data, full)
    inertia = np.maximum(np.diag(full), 1e-9)
    rate = float(np.max(kd / inertia + np.sqrt(kp / inertia)))
    period = 1.0 / cond.fs
    limit = min(float(mj.opt.timestep), 0.3 / max(rate, 1e-9))
    if period > limit:  # slow logs (a vendor's 100 Hz): a fraction of the period
        return period / int(np.ceil(period / limit))
    return period * max(1, int(limit / period))


def _simulation_model(target: Target, theta: np.ndarray):
    if target.kind == "arm":
        # consistent to the solver's tolerance: a principal moment may sit at -1e-7 of a body that
        # the data make thin; simulate the realizable body closest to it
        theta = theta.copy()
        for _label, sl in target.body_blocks:
            mass, com, inertia = inertial_from_body_params(theta[sl])
            theta[sl] = body_params_from_inertial(mass, com, realizable_inertia(inertia))
        mj = copy.deepcopy(target.model.mj)
        target.model.apply_to(mj, theta)
        return mj
    mass, com, inertia = inertial_from_body_params(theta)
    return with_payload(target.model, Payload(target.model.body_name(target.body), max(mass, 1e-6), com,
                                              realizable_inertia(inertia)))


def iv_method(constrained: bool) -> Callable:
    name = "pc_iv" if constrained else "iv"

    def run(prep: Prepared, options: IdentifyOptions, say) -> IdentificationResult:
        start = time.perf_counter()
        target = prep.target
        base = target.base
        xb, rhs, joint = prep.rows()
        theta = target.prior.copy()
        beta_prev = base.of(theta)
        history = []
        step = None
        x_rank = regressor_rank(xb)
        for it in range(1, options.iv_max_iter + 1):
            z = _instruments(prep, theta)
            zb, _, _ = regression_rows(z, prep.y, prep.mask)
            step = iv_step(xb, zb, rhs, target=target if constrained else None,
                           b_matrix=base.matrix if constrained else None, x_rank=x_rank)
            done, change = converged(step.beta, beta_prev, options.iv_tol)
            history.append(change)
            say(f"{name} iteration {it}: relative change {change:.3e}, IV gradient "
                f"{step.gradient_norm:.2e}")
            beta_prev = step.beta
            theta = step.theta if constrained else consistent_from_base(prep, step.beta).theta
            if done:
                break
        else:
            log.warning("%s did not converge in %d iterations (last change %.3e)", name,
                        options.iv_max_iter, history[-1])
        assert step is not None
        beta = step.beta
        cov = iv_covariance(xb, zb, rhs - xb @ beta, joint, prep.y.shape[1])
        iterations, done = len(history), history[-1] < options.iv_tol
        extra = {"relative_change": history, "iv_gradient": step.gradient_norm, "pi_rank": step.pi_rank}
        if step.solution is not None:
            solver = solver_status(step.solution, iterations=iterations, converged=done)
            extra |= multipliers(step.solution)
        else:
            solver = SolverStatus(iterations=iterations, converged=done)
        diag = diagnostics_for(xb, rhs, joint, beta, n_joints=prep.y.shape[1], n_samples=len(prep.t),
                               solve_time=time.perf_counter() - start, extra=extra)
        result = IdentificationResult(name, base, beta, np.sqrt(np.maximum(np.diag(cov), 0.0)), diag,
                                      solver=solver)
        # iv: θ is already the consistent projection of the last β (the next instruments' model)
        return with_parameters(result, target, theta, name if constrained else PROJECTED)

    return run


