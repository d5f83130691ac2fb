"""Closed-loop MuJoCo simulation under the Damiao MIT law, recorded for identification.

Each physics step applies per dof ``τ = kp (q* − q) + kd (q̇* − q̇) + τ_ff`` saturated at the torque
limit, through ``qfrc_applied`` (the model's own actuators are disabled), then records the state
before the step, the applied torque and MuJoCo's forward-dynamics acceleration at that state. The
stepping is :class:`~sysid_ros.core.sim.plant.MitPlant`'s (:meth:`~.plant.MitPlant.run`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from sysid_ros.core.data.fourier import FourierTrajectory
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import MitPlant, Push, SensorModel, SimulatedRun

__all__ = ["MAX_STEPS", "Recording", "SensorModel", "SimulatedRun", "check_steps", "default_gains", "run_mit",
           "simulate_mit"]

#: most physics steps one recorded run may take (2e6: 33 min at 1 kHz, 20 s at 100 kHz; a 6-dof
#: recording of that length holds about 1 GB)
MAX_STEPS = 2_000_000


def check_steps(duration: float, timestep: float) -> int:
    """The number of steps ``round(duration / timestep)`` of a recorded run, refusing non-finite or
    non-positive durations [s] and time steps [s], runs shorter than one step and runs longer
    than :data:`MAX_STEPS` (:class:`SysIdError` naming the numbers)."""
    if not (math.isfinite(timestep) and timestep > 0):
        raise SysIdError(f"the time step must be a finite number > 0 s, got {timestep} s "
                         f"(rate {1.0 / timestep if timestep else math.inf:g} Hz)")
    if not (math.isfinite(duration) and duration > 0):
        raise SysIdError(f"the duration must be a finite number > 0 s, got {duration} s")
    steps = round(duration / timestep)
    if steps < 1:
        raise SysIdError(f"duration {duration} s is shorter than one time step ({timestep} s)")
    if steps > MAX_STEPS:
        raise SysIdError(f"{duration:g} s at {1.0 / timestep:g} Hz is {steps:.4g} samples, more than the "
                         f"limit of {MAX_STEPS:.4g}: lower the rate or the duration")
    return steps


def default_gains(model: RobotModel, q: np.ndarray | None = None, *, bandwidth_hz: float = 3.0,
                  damping_ratio: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-joint PD gains ``(kp, kd)`` (hinge/slide joints) placing each, alone, at ``bandwidth_hz`` with
    ``damping_ratio``: ``kp = M_jj ω²``, ``kd = 2 ζ ω M_jj`` with ``M_jj`` the diagonal of the mass
    matrix (armature included) at ``q`` (default: the middle of the joint ranges)."""
    act = model.dof_indices
    lo, hi = (x[act] for x in model.joint_limits())
    limited = np.isfinite(lo) & np.isfinite(hi)
    mid = np.where(limited, 0.5 * (np.where(limited, lo, 0.0) + np.where(limited, hi, 0.0)), 0.0)
    data = mujoco.MjData(model.mj)
    data.qpos[model.joint_qpos_indices] = mid if q is None else q
    mujoco.mj_forward(model.mj, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model.mj, data, full)
    inertia = np.diag(full)[act]
    omega = 2.0 * np.pi * bandwidth_hz
    return inertia * omega**2, 2.0 * damping_ratio * omega * inertia


@dataclass(frozen=True)
class Recording:
    """Samples of a run, ``N`` rows, dof order of the model (SI units).

    ``t (N,)``; ``q (N, nq)``; ``dq``, ``ddq``, ``tau`` (applied torque) ``(N, nv)``; the reference
    ``q_ref``, ``dq_ref``, ``tau_ff`` ``(N, nv)`` and the gains ``kp``, ``kd`` ``(nv,)``;
    ``saturated (N, nv)``: the torque limit clipped the command; ``q_true``/``dq_true`` the state
    before measurement noise and quantisation.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    q_ref: np.ndarray
    dq_ref: np.ndarray
    tau_ff: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    saturated: np.ndarray
    q_true: np.ndarray | None = None
    dq_true: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)


def simulate_mit(
    model: RobotModel,
    trajectory: FourierTrajectory,
    duration: float,
    *,
    kp: float | np.ndarray | None = None,
    kd: float | np.ndarray | None = None,
    truth: mujoco.MjModel | None = None,
    feedforward_theta: np.ndarray | None = None,
    decimation: int = 1,
    solver_tolerance: float = 1e-12,
    sensor: SensorModel | None = None,
    timestep: float | None = None,
    integrator: str = "euler",
    pushes: Sequence[Push] = (),
) -> Recording:
    """Run ``trajectory`` for ``duration`` seconds on ``truth`` (default: the model's own MjModel).

    ``τ_ff`` is the inverse dynamics of the reference with ``feedforward_theta`` (default: the
    nominal parameters); ``kp``/``kd`` per dof or scalar [N·m/rad, N·m·s/rad], by default
    :func:`default_gains` of the model. The run starts at
    the reference's initial position and velocity. Every ``decimation``-th step is recorded.
    ``solver_tolerance`` replaces MuJoCo's constraint-solver tolerance (default 1e-8) so that
    recorded accelerations are exact even while friction loss is in its soft (sticking) zone.
    ``sensor``: measurement noise and quantisation (recorded ``q``, ``dq``, ``tau`` are then the
    measurements; ``ddq`` stays the true acceleration). ``timestep`` overrides the model's [s].
    ``integrator``: "euler" (samples consistent with finite differences) or "rk4" (conserves
    momentum and energy far better, for free-floating runs). ``pushes``: external wrenches during
    the run (unexpected contacts, :class:`~sysid_ros.core.sim.plant.Push`; times from the start).
    """
    mj = truth if truth is not None else model.mj
    if mj.nv != model.nv or mj.nq != model.nq:
        raise SysIdError(f"the simulated model has nq={mj.nq}, nv={mj.nv}; expected {model.nq}, {model.nv}")
    act = model.dof_indices
    if trajectory.q0.shape != (act.size,):
        raise SysIdError(f"expected a trajectory of the {act.size} hinge/slide joints, got "
                         f"{trajectory.q0.shape[0]}")
    floating = act.size != model.nv
    dt = float(mj.opt.timestep if timestep is None else timestep)
    steps = check_steps(duration, dt)
    t = np.arange(steps) * dt
    q_ref, dq_ref, ddq_ref = trajectory.evaluate(t)
    if floating:  # the inverse dynamics of a floating base needs its acceleration: PD only
        tau_ff = np.zeros_like(q_ref)
    else:
        theta_ff = model.nominal if feedforward_theta is None else model.check_theta(feedforward_theta)
        from sysid_ros.core.model.regressor import torque_regressor  # (compiled kernels: only here)

        tau_ff = torque_regressor(model, q_ref, dq_ref, ddq_ref) @ theta_ff
    kp_default, kd_default = default_gains(model)
    kp_v = np.broadcast_to(np.asarray(kp_default if kp is None else kp, dtype=float), (act.size,)).copy()
    kd_v = np.broadcast_to(np.asarray(kd_default if kd is None else kd, dtype=float), (act.size,)).copy()
    plant = MitPlant.of(model, mj, timestep=dt, sensor=sensor, integrator=integrator,
                        solver_tolerance=solver_tolerance, pushes=pushes)
    plant.set_state(qpos=mj.qpos0, q=q_ref[0], dq=dq_ref[0])
    run = plant.run(q_ref, dq_ref, tau_ff, kp_v, kd_v, decimation=decimation)
    sl = slice(None, None, decimation)
    return Recording(t[sl], run.q, run.dq, run.ddq, run.tau, q_ref[sl], dq_ref[sl], tau_ff[sl], kp_v,
                     kd_v, run.saturated, run.q_true, run.dq_true)


def run_mit(mj: mujoco.MjModel, q_ref: np.ndarray, dq_ref: np.ndarray, tau_ff: np.ndarray,
            kp: np.ndarray, kd: np.ndarray, limit: np.ndarray, *, dt: float, q0: np.ndarray,
            dq0: np.ndarray, sensor: SensorModel | None = None, solver_tolerance: float = 1e-12,
            decimation: int = 1, actuated: tuple[np.ndarray, np.ndarray] | None = None,
            integrator: str = "euler") -> SimulatedRun:
    """Step ``mj`` under the MIT law for every row of the commands (``(K, nv)``; ``kp``/``kd``
    ``(nv,)`` or ``(K, nv)``) with time step ``dt``. Returns recorded ``(q, dq, ddq, tau,
    saturated)`` of every ``decimation``-th step (measured q, dq, tau; true ddq).
    ``actuated``: (qpos indices, dof indices) of the commanded joints (default: every dof, which
    needs nq == nv); the others (a free-floating base) get no torque. Recorded ``q`` is then the
    whole ``qpos`` (only actuated joints measured with noise), ``dq``/``ddq``/``tau`` whole ``nv``.

    The copy is integrated with semi-implicit Euler without MuJoCo's implicit joint damping, so
    the samples obey ``v₊ = v + h a`` and ``q₊ = q + h v₊`` exactly: a sampled trajectory whose
    finite differences are consistent with the recorded torque.
    """
    if actuated is None:
        if mj.nq != mj.nv:
            raise SysIdError("pass the actuated joints for a model with ball/free joints")
        joints = None
    else:
        joints = [int(j) for j in mj.dof_jntid[np.asarray(actuated[1], dtype=int)]]
    plant = MitPlant(mj, timestep=dt, joints=joints, torque_limit=limit, sensor=sensor,
                     integrator=integrator, solver_tolerance=solver_tolerance)
    plant.set_state(qpos=q0, qvel=dq0)
    return plant.run(q_ref, dq_ref, tau_ff, kp, kd, decimation=decimation)
