"""Simulated runs in which the robot changes mid-run: a payload picked up, joint friction that
grows (overview seed: "track a parameter that changes mid-run"). What the EKF, MHE and RLS with
forgetting are compared on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.regressor import torque_regressor
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.sim.plant import MitPlant
from sysid_ros.core.sim.simulation import SensorModel, check_steps, default_gains
from sysid_ros.core.sim.synthetic import Payload, with_payload

#: name of the payload body :func:`with_payload` adds
PAYLOAD_BODY = "sysid_payload"


@dataclass(frozen=True)
class ChangeRun:
    """A run and its truth on both sides of ``change_time`` [s]: ``theta_before``/``theta_after``
    ``(p,)`` the arm's parameters in ``model.param_names`` order (joint friction ``Fc``, ``Fv``
    scaled by the friction factor after the change), ``payload_before``/``payload_after``
    ``(10,)`` the payload's (zeros before it is picked up)."""

    dataset: Dataset
    change_time: float
    theta_before: np.ndarray
    theta_after: np.ndarray
    payload_before: np.ndarray
    payload_after: np.ndarray


def simulate_change(model: RobotModel, *, duration: float, change_time: float,
                    payload: Payload | None = None, friction_factor: float = 1.0,
                    rate: float | None = None, seed: int = 0, sensor: SensorModel | None = None,
                    harmonics: int = 5, period: float = 10.0) -> ChangeRun:
    """Excite ``model`` under the MIT law (feed-forward of the nominal model) for ``duration``
    [s]; at ``change_time`` [s] ``payload`` appears on its body (massless before: picked up) and
    every joint's Coulomb (``frictionloss``) and viscous (``damping``) friction is multiplied by
    ``friction_factor``. ``rate`` [Hz]: physics and recording rate (default the model's)."""
    if not 0 < change_time < duration:
        raise SysIdError(f"the change must happen within the run (0, {duration}) s, got {change_time} s")
    if not friction_factor > 0:
        raise SysIdError(f"the friction factor must be > 0, got {friction_factor}")
    model.check_fixed_base("a simulated change")
    mj = with_payload(model, payload) if payload is not None else model.mj
    dt = float(mj.opt.timestep if rate is None else 1.0 / rate)
    steps = check_steps(duration, dt)
    k_change = check_steps(change_time, dt)
    traj = FourierTrajectory.random(Limits.of(model), harmonics=harmonics, period=period, seed=seed)
    t = np.arange(steps) * dt
    q_ref, dq_ref, ddq_ref = traj.evaluate(t)
    tau_ff = torque_regressor(model, q_ref, dq_ref, ddq_ref) @ model.nominal
    kp, kd = default_gains(model)
    plant = MitPlant.of(model, mj, timestep=dt, sensor=sensor, solver_tolerance=1e-12)
    plant.set_state(qpos=mj.qpos0, q=q_ref[0], dq=dq_ref[0])
    sim = plant.mj  # the plant's own copy: changed in place mid-run
    saved = None
    if payload is not None:
        bid = sim.body(PAYLOAD_BODY).id
        saved = (bid, float(sim.body_mass[bid]), sim.body_inertia[bid].copy())
        sim.body_mass[bid], sim.body_inertia[bid] = 0.0, 0.0
    first = plant.run(q_ref[:k_change], dq_ref[:k_change], tau_ff[:k_change], kp, kd)
    if saved is not None:
        bid, mass, inertia = saved
        sim.body_mass[bid], sim.body_inertia[bid] = mass, inertia
    sim.dof_damping[:] *= friction_factor
    sim.dof_frictionloss[:] *= friction_factor
    second = plant.run(q_ref[k_change:], dq_ref[k_change:], tau_ff[k_change:], kp, kd)
    q, dq, ddq, tau = (np.vstack((getattr(first, f), getattr(second, f))) for f in ("q", "dq", "ddq", "tau"))
    after = model.nominal.copy()
    for i, name in enumerate(model.param_names):
        if name.rsplit(".", 1)[1] in ("Fc", "Fv"):
            after[i] *= friction_factor
    zero = np.zeros(10)
    ds = Dataset(t, model.dof_joint_names, q, dq, tau,
                 source=f"simulated change of {model.source or 'model'}",
                 meta={"ddq_true": ddq, "change_time": float(k_change * dt)})
    return ChangeRun(ds, float(k_change * dt), model.nominal.copy(), after, zero,
                     zero if payload is None else payload.params)
