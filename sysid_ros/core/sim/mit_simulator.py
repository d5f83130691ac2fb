"""A robot in MuJoCo obeying the Damiao MIT law, stepped one physics step at a time: the core of
the ``mujoco_sim`` node (no ROS here).

Per actuated joint ``τ = kp (q* − q) + kd (q̇* − q̇) + τ_ff``, saturated at the motor's torque
limit, computed from the *measured* state (noise, encoder quantisation) like real motors do. The
last command is held when commands stop; after ``command_timeout`` of silence the joints go limp
(zero torque plus ``limp_damping``), as a motor whose CAN watchdog expired. Before the first
command the robot holds its initial pose with the default gains (a powered arm at rest).
Commands and measurements can be delayed by whole physics steps.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import mujoco
import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import BODY_FIELDS, RobotModel
from sysid_ros.core.sim.simulation import SensorModel, default_gains
from sysid_ros.core.sim.synthetic import Payload, floating_base, true_parameters, with_payload

__all__ = ["JointSample", "MitSimulator", "SimOptions"]


@dataclass(frozen=True)
class SimOptions:
    """Options of :class:`MitSimulator` (SI units).

    ``rate`` physics rate [Hz]; ``payload`` welded to a body (unknown to the controller);
    ``floating_base``: a free joint under the first body and zero gravity (orbital case);
    ``joint_friction``/``armature``: keep the MJCF's friction loss and damping / rotor inertia
    (else zeroed); ``sensor``: measurement noise and quantisation; ``command_delay`` and
    ``measurement_delay`` [s] (rounded to whole steps); ``command_timeout`` [s] of silence before
    going limp; ``limp_damping`` [N·m·s/rad]; ``initial_position`` (nv_act,) [rad] (default: the
    middle of each joint's range); ``integrator``: "euler" (semi-implicit, finite differences of
    the samples match the torques) or "rk4" (for free-floating runs).
    """

    rate: float = 1000.0
    payload: Payload | None = None
    floating_base: bool = False
    joint_friction: bool = True
    armature: bool = True
    sensor: SensorModel = field(default_factory=SensorModel)
    command_delay: float = 0.0
    measurement_delay: float = 0.0
    command_timeout: float = 0.5
    limp_damping: float = 0.5
    initial_position: np.ndarray | None = None
    integrator: str = "euler"


class JointSample(NamedTuple):
    """One measurement: time [s], measured ``q``, ``dq`` and applied torque ``tau`` (each
    ``(n,)`` in :attr:`MitSimulator.joint_names` order); ``mode`` "hold" | "command" | "limp"."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    mode: str


class _Command(NamedTuple):
    due: int  # step at which it takes effect
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


class MitSimulator:
    """Step a robot under MIT-mode commands. ``model``: the bare robot (what the controller
    knows); the simulated robot adds the options' payload, floating base, friction choices."""

    def __init__(self, model: RobotModel, options: SimOptions | None = None) -> None:
        self.options = opt = options or SimOptions()
        if not opt.rate > 0:
            raise SysIdError(f"the physics rate must be positive, got {opt.rate}")
        if opt.integrator not in ("euler", "rk4"):
            raise SysIdError(f"integrator must be 'euler' or 'rk4', got {opt.integrator!r}")
        self.model = floating_base(model) if opt.floating_base else model
        sim = (with_payload(self.model, opt.payload) if opt.payload is not None
               else copy.deepcopy(self.model.mj))
        if not opt.joint_friction:
            sim.dof_frictionloss[:] = 0.0
            sim.dof_damping[:] = 0.0
        if not opt.armature:
            sim.dof_armature[:] = 0.0
        sim.opt.timestep = 1.0 / opt.rate
        sim.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
        sim.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
        sim.opt.integrator = int(mujoco.mjtIntegrator.mjINT_EULER if opt.integrator == "euler"
                                 else mujoco.mjtIntegrator.mjINT_RK4)
        self.mj = sim
        self.data = mujoco.MjData(sim)
        self._qadr = _as_slice(self.model.joint_qpos_indices)  # a slice when contiguous: cheaper
        self._dofs = _as_slice(self.model.dof_indices)
        self.joint_names: tuple[str, ...] = self.model.dof_joint_names
        self._index = {n: i for i, n in enumerate(self.joint_names)}
        n = len(self.joint_names)
        self.torque_limit = self.model.torque_limits()[self._dofs]
        self._neg_limit = -self.torque_limit
        lo, hi = (x[self._dofs] for x in self.model.joint_limits())
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
        start = mid if opt.initial_position is None else np.asarray(opt.initial_position, dtype=float)
        if start.shape != (n,):
            raise SysIdError(f"expected an initial position of the {n} joints, got {start.shape}")
        self.data.qpos[self._qadr] = start
        mujoco.mj_forward(sim, self.data)
        kp, kd = default_gains(self.model, start)
        self._hold = _Command(0, start.copy(), np.zeros(n), np.zeros(n), kp, kd)
        self._active = self._hold
        self._pending: deque[_Command] = deque()
        self._last_command_step: int | None = None
        self._cmd_delay = round(opt.command_delay * opt.rate)
        self._meas_delay = round(opt.measurement_delay * opt.rate)
        self._timeout_steps = max(1, round(opt.command_timeout * opt.rate))
        self._measurements: deque[JointSample] = deque(maxlen=self._meas_delay + 1)
        self._rng = np.random.default_rng(opt.sensor.seed)
        self._tau = np.zeros(self.mj.nv)
        self.step_count = 0
        self.counters = {"commands": 0, "saturated_steps": 0, "limp_steps": 0}

    # ---------------------------------------------------------------------------- properties
    @property
    def time(self) -> float:
        """Simulated time [s] of the next step."""
        return self.step_count / self.options.rate

    @property
    def mode(self) -> str:
        if self._last_command_step is None:
            return "hold"
        return "limp" if self.step_count - self._last_command_step > self._timeout_steps else "command"

    def true_parameters(self) -> tuple[tuple[str, ...], np.ndarray]:
        """Names and values of the simulated robot's parameters in the model's layout (payload
        merged into its body, joint terms as simulated), plus ``payload.<field>`` entries for the
        payload alone."""
        model = self.model
        theta = true_parameters(model, self.options.payload)
        # joint terms as simulated (friction/armature options); a welded payload adds no dofs
        terms = slice(model.n_body_params, None)
        theta[terms] = model.params_of(self.mj)[terms]
        names = list(model.param_names)
        values = list(theta)
        if self.options.payload is not None:
            names += [f"payload.{f}" for f in BODY_FIELDS]
            values += list(self.options.payload.params)
        return tuple(names), np.asarray(values)

    # ------------------------------------------------------------------------------ commands
    def command(self, names, position, velocity, effort, kp=(), kd=()) -> None:
        """Take an MIT command for the named joints (others keep theirs). Empty ``kp``/``kd``
        keep the current gains. Raises :class:`DataError` (and changes nothing) on unknown
        names, mismatched lengths or non-finite values."""
        names = list(names)
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise DataError(f"unknown joint names {unknown}; this robot has {list(self.joint_names)}")
        fields = {"position": position, "velocity": velocity, "effort": effort, "kp": kp, "kd": kd}
        arrays = {}
        for key, val in fields.items():
            arr = np.asarray(val, dtype=float).ravel()
            if key in ("kp", "kd") and arr.size == 0:
                arrays[key] = None
                continue
            if arr.size != len(names):
                raise DataError(f"{key}: expected {len(names)} values (one per name), got {arr.size}")
            if not np.all(np.isfinite(arr)):
                raise DataError(f"{key}: non-finite values {arr.tolist()}")
            if key in ("kp", "kd") and np.any(arr < 0):
                raise DataError(f"{key}: gains must be >= 0, got {arr.tolist()}")
            arrays[key] = arr
        base = self._pending[-1] if self._pending else self._active
        idx = np.array([self._index[n] for n in names], dtype=int)
        new = [x.copy() for x in base[1:]]
        for slot, key in enumerate(("position", "velocity", "effort", "kp", "kd")):
            if arrays[key] is not None:
                new[slot][idx] = arrays[key]
        self._pending.append(_Command(self.step_count + self._cmd_delay, *new))
        self.counters["commands"] += 1

    # ---------------------------------------------------------------------------------- step
    def step(self) -> JointSample | None:
        """Advance one physics step. Returns the measurement due now (``None`` while the
        measurement delay fills): the measured state before the step and the applied torque."""
        sensor, data, n = self.options.sensor, self.data, len(self.joint_names)
        while self._pending and self._pending[0].due <= self.step_count:
            self._active = self._pending.popleft()
            self._last_command_step = self._active.due
        q = data.qpos[self._qadr].copy()
        dq = data.qvel[self._dofs].copy()
        if not sensor.ideal:
            q += sensor.position_noise * self._rng.standard_normal(n)
            if sensor.encoder_resolution > 0:
                q = np.round(q / sensor.encoder_resolution) * sensor.encoder_resolution
            dq += sensor.velocity_noise * self._rng.standard_normal(n)
        mode = self.mode
        if mode == "limp":
            tau = -self.options.limp_damping * dq
            self.counters["limp_steps"] += 1
        else:
            c = self._active
            tau = c.kp * (c.position - q) + c.kd * (c.velocity - dq) + c.effort
        applied = tau.clip(self._neg_limit, self.torque_limit)
        if (applied != tau).any():
            self.counters["saturated_steps"] += 1
        self._tau[self._dofs] = applied
        data.qfrc_applied[:] = self._tau
        measured_tau = applied
        if sensor.torque_noise:
            measured_tau = applied + sensor.torque_noise * self._rng.standard_normal(n)
        self._measurements.append(JointSample(self.time, q, dq, measured_tau, mode))
        mujoco.mj_step(self.mj, data)
        self.step_count += 1
        if not math.isfinite(data.qpos.sum()):
            raise SysIdError(f"the simulation diverged at t={self.time:.3f} s")
        if len(self._measurements) <= self._meas_delay:
            return None
        return self._measurements[0]


def _as_slice(indices: np.ndarray) -> slice | np.ndarray:
    """``indices`` as a slice when they are contiguous and increasing (a view, no gather)."""
    idx = np.asarray(indices, dtype=int)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx
