"""The one MuJoCo plant of the package: a robot stepped under the Damiao MIT law, with the motors'
torque saturation and a sensor model (no ROS).

Per actuated joint, from the *measured* state ``(q, q̇)``::

    τ = clip(kp (q* − q) + kd (q̇* − q̇) + τ_ff, −τ_max, τ_max)

applied through ``qfrc_applied`` (the model's own actuators are disabled) for one physics step.
Stribeck friction, which MuJoCo does not model, is applied there too: a joint with a custom numeric
``stribeck:<joint>`` = ``"Fs q̇s"`` gets ``−Fs·exp(−|q̇|/q̇s)·sign(q̇)`` at the step's (true)
velocity (:func:`~sysid_ros.core.model.robot.stribeck_numerics`); so is the sigmoid friction of a
joint with ``sigmoid:<joint>`` = ``"φ1 φ2 φ3"``: ``−φ1·(σ(φ2(q̇ + φ3)) − σ(φ2 φ3))``
(:func:`~sysid_ros.core.model.robot.sigmoid_numerics`).
The sensor model (:class:`SensorModel`) adds white noise to the measured position, velocity and
torque and quantises the position to the encoder's resolution; commands and measurements can be
delayed by whole steps, and a watchdog can take the joints limp (damping only) after a silence.
External pushes (:class:`Push`: a force and torque on a named body for a time window, through
MuJoCo's ``xfrc_applied``) stand in for unexpected contacts.

Every MuJoCo simulation of the package steps through a :class:`MitPlant`:

* recorded runs (``sysid simulate``, synthetic data, IV instruments): :meth:`MitPlant.run`,
  through :func:`~sysid_ros.core.sim.simulation.simulate_mit` and
  :func:`~sysid_ros.core.sim.simulation.run_mit`;
* the ``mujoco_sim`` node: :meth:`MitPlant.send` and :meth:`MitPlant.step`, through
  :class:`~sysid_ros.core.sim.mit_simulator.MitSimulator`;
* the Damiao motor emulator, whose firmware model computes (and saturates at its TMAX register)
  each motor's torque in motor space: :meth:`MitPlant.step_torque`.

MuJoCo options are set here once: actuation disabled (torques come from the law), implicit
joint damping in the Euler integrator disabled (``mjDSBL_EULERDAMP``: with semi-implicit Euler the
samples obey ``v₊ = v + h a`` and ``q₊ = q + h v₊`` exactly, so their finite differences are
consistent with the recorded torques), the time step, and optionally the integrator ("euler" or
"rk4"; ``None`` keeps the model's) and the constraint solver's tolerance.
"""

from __future__ import annotations

import copy
import math
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import mujoco
import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel, sigmoid_numerics, stribeck_numerics

__all__ = ["JointCommand", "MitPlant", "PlantSample", "Push", "SensorModel", "SimulatedRun",
           "SimulationError", "mit_torque"]


def _columns():
    """The regressor module (its friction-shape columns), imported on the first step of a plant
    with Stribeck or sigmoid friction only: it brings the compiled kernels (numba) and scipy,
    seconds of a simulator node's start on a busy host that a plant without them never needs."""
    from sysid_ros.core.model import regressor

    return regressor


Integrator = Literal["euler", "rk4"]
_INTEGRATORS = {"euler": int(mujoco.mjtIntegrator.mjINT_EULER), "rk4": int(mujoco.mjtIntegrator.mjINT_RK4)}
_HINGE_OR_SLIDE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
#: MuJoCo's warnings of a diverged state (NaN, infinite or > 1e10 in qpos, qvel, qacc); MuJoCo
#: then resets the data to the model's reference pose and carries on
_DIVERGENCE_WARNINGS = {int(mujoco.mjtWarning.mjWARN_BADQPOS): "position",
                        int(mujoco.mjtWarning.mjWARN_BADQVEL): "velocity",
                        int(mujoco.mjtWarning.mjWARN_BADQACC): "acceleration"}


class SimulationError(SysIdError):
    """The simulated robot's state stopped being finite or sane (the physics diverged: MuJoCo
    flagged a NaN, infinite or huge position, velocity or acceleration and reset the data)."""


@dataclass(frozen=True)
class SensorModel:
    """What the motors measure. Standard deviations of white noise (``position_noise`` [rad],
    ``velocity_noise`` [rad/s], ``torque_noise`` [N·m]) and the encoder resolution [rad/count]
    (0 = ideal). Position and velocity measurements close the control loop; torque noise is
    sensor noise only (the applied torque is what the law commands)."""

    position_noise: float = 0.0
    velocity_noise: float = 0.0
    torque_noise: float = 0.0
    encoder_resolution: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("position_noise", "velocity_noise", "torque_noise", "encoder_resolution"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise SysIdError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def ideal(self) -> bool:
        return not (self.position_noise or self.velocity_noise or self.torque_noise
                    or self.encoder_resolution)

    def as_dict(self) -> dict[str, float]:
        return {"position_noise": self.position_noise, "velocity_noise": self.velocity_noise,
                "torque_noise": self.torque_noise, "encoder_resolution": self.encoder_resolution,
                "seed": self.seed}


@dataclass(frozen=True)
class Push:
    """An external wrench on ``body`` (an unexpected contact): ``force (3,)`` [N] and ``torque
    (3,)`` [N·m] in world axes, applied at the body's centre of mass (MuJoCo's ``xfrc_applied``)
    from ``start`` [s, simulated] for ``duration`` [s]."""

    body: str
    force: tuple[float, float, float]
    torque: tuple[float, float, float] = (0.0, 0.0, 0.0)
    start: float = 0.0
    duration: float = 0.1

    def __post_init__(self) -> None:
        for name in ("force", "torque"):
            value = getattr(self, name)
            if len(value) != 3 or not all(math.isfinite(float(x)) for x in value):
                raise SysIdError(f"push {name}: expected 3 finite numbers, got {list(value)}")
            object.__setattr__(self, name, tuple(float(x) for x in value))
        if not (math.isfinite(self.start) and self.start >= 0 and math.isfinite(self.duration)
                and self.duration > 0):
            raise SysIdError(f"push: expected start >= 0 s and duration > 0 s, got start {self.start}, "
                             f"duration {self.duration}")

    @classmethod
    def parse(cls, spec: str) -> Push:
        """From ``body=NAME,force=FX,FY,FZ[,torque=TX,TY,TZ],start=S,duration=S`` [N, N·m, s]."""
        fields = dict(re.findall(r"(\w+)=([^=]+?)(?=,\w+=|$)", spec.strip()))
        unknown = set(fields) - {"body", "force", "torque", "start", "duration"}
        if unknown or not {"body", "force", "start", "duration"} <= set(fields):
            raise SysIdError("expected a push body=NAME,force=FX,FY,FZ[,torque=TX,TY,TZ],start=S,"
                             f"duration=S [N, N·m, s], got {spec!r}")
        try:
            force = tuple(float(x) for x in fields["force"].split(","))
            torque = (tuple(float(x) for x in fields["torque"].split(",")) if "torque" in fields
                      else (0.0, 0.0, 0.0))
            return cls(fields["body"], force, torque, float(fields["start"]), float(fields["duration"]))
        except ValueError as exc:
            raise SysIdError(f"push {spec!r}: {exc}") from None

    def steps(self, timestep: float) -> tuple[int, int]:
        """The steps ``[first, stop)`` it acts in at ``timestep`` [s] (at least one)."""
        first = round(self.start / timestep)
        return first, max(first + 1, round((self.start + self.duration) / timestep))


class JointCommand(NamedTuple):
    """One MIT command for the plant's actuated joints, each ``(n,)``: target ``position`` [rad],
    ``velocity`` [rad/s], feed-forward ``effort`` [N·m], gains ``kp`` [N·m/rad], ``kd``
    [N·m·s/rad] (metres and newtons for slide joints)."""

    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray


def mit_torque(command: JointCommand, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """The MIT law before saturation, ``kp (q* − q) + kd (q̇* − q̇) + τ_ff`` ``(n,)``."""
    return command.kp * (command.position - q) + command.kd * (command.velocity - dq) + command.effort


class PlantSample(NamedTuple):
    """One step's measurement: ``step`` index it was taken at (before that step), measured ``q``,
    ``dq``, torque ``tau`` (applied + sensor noise) and the ``applied`` torque, each ``(n,)``;
    ``saturated (n,)``: the torque limit clipped the law; ``mode``: "hold" (no command has taken
    effect yet: the initial hold command acts), "command" or "limp" (watchdog expired)."""

    step: int
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    applied: np.ndarray
    saturated: np.ndarray
    mode: str


class SimulatedRun(NamedTuple):
    """Recorded steps of :meth:`MitPlant.run` (``K`` rows): measured ``q (K, nq)`` (the whole
    ``qpos``, the actuated joints measured), ``dq (K, nv)``, ``tau (K, nv)`` (measured torque, 0 on
    unactuated dofs); true ``ddq (K, nv)`` (forward dynamics at the state before the step),
    ``q_true``, ``dq_true`` (state before the step); ``saturated (K, n)``."""

    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    saturated: np.ndarray
    q_true: np.ndarray
    dq_true: np.ndarray


class MitPlant:
    """A MuJoCo model and its data stepped under the MIT law of the actuated joints.

    ``mj``: the simulated model (copied unless ``copy=False``; its options are then changed in
    place); ``timestep`` [s]; ``joints``: the actuated hinge/slide joints by name or joint id, in
    the order of every ``(n,)`` vector (default: every hinge/slide joint in dof order; others,
    e.g. a free base, get no torque); ``torque_limit (n,)`` [N·m] the saturation of the law
    (default none; :meth:`of` takes the motors' limits); ``sensor``: noise and quantisation;
    ``command_delay_steps``: a command sent at step k acts from step k + d;
    ``measurement_delay_steps``: :meth:`step` returns the sample taken d steps before;
    ``command_timeout_steps``: once a command acted, a silence longer than this makes the joints
    limp (``τ = −limp_damping·q̇``, saturated; ``None`` = never); ``hold``: the command acting
    before the first one sent (default: zero torque); ``pushes``: external wrenches (:class:`Push`,
    times counted in steps from step 0).
    """

    def __init__(self, mj: mujoco.MjModel, *, timestep: float,
                 joints: Sequence[str | int] | None = None, torque_limit: np.ndarray | None = None,
                 sensor: SensorModel | None = None, integrator: Integrator | None = "euler",
                 solver_tolerance: float | None = None, command_delay_steps: int = 0,
                 measurement_delay_steps: int = 0, command_timeout_steps: int | None = None,
                 limp_damping: float = 0.0, hold: JointCommand | None = None, copy: bool = True,
                 pushes: Sequence[Push] = ()) -> None:
        if not timestep > 0:
            raise SysIdError(f"the time step must be positive, got {timestep} s")
        if integrator is not None and integrator not in _INTEGRATORS:
            raise SysIdError(f"integrator must be 'euler' or 'rk4', got {integrator!r}")
        if command_delay_steps < 0 or measurement_delay_steps < 0:
            raise SysIdError(f"delays must be >= 0 steps, got command {command_delay_steps}, "
                             f"measurement {measurement_delay_steps}")
        sim = _copy(mj) if copy else mj
        sim.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
        sim.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
        sim.opt.timestep = timestep
        if integrator is not None:
            sim.opt.integrator = _INTEGRATORS[integrator]
        if solver_tolerance is not None:
            sim.opt.tolerance = solver_tolerance
        self.mj = sim
        self.data = mujoco.MjData(sim)
        # views of MuJoCo's divergence counters, read after every step (see _advance)
        self._divergence = tuple((self.data.warning[w], what) for w, what in _DIVERGENCE_WARNINGS.items())
        self.timestep = float(timestep)
        self._rk4 = int(sim.opt.integrator) == _INTEGRATORS["rk4"]

        ids = _joint_ids(sim, joints)
        self.joint_ids = ids
        self.qpos_indices = np.asarray(sim.jnt_qposadr[ids], dtype=int)
        self.dof_indices = np.asarray(sim.jnt_dofadr[ids], dtype=int)
        self._qadr, self._dofs = _as_slice(self.qpos_indices), _as_slice(self.dof_indices)
        n = self.n = ids.size
        limit = np.full(n, np.inf) if torque_limit is None else np.asarray(torque_limit, dtype=float)
        if limit.shape != (n,) or np.any(limit < 0):
            raise SysIdError(f"expected {n} torque limits >= 0, got {limit.tolist()}")
        self.torque_limit = limit
        self._neg_limit = -limit

        self.sensor = sensor or SensorModel()
        self._ideal = self.sensor.ideal
        self._rng = np.random.default_rng(self.sensor.seed)
        self._cmd_delay = int(command_delay_steps)
        self._meas_delay = int(measurement_delay_steps)
        self._timeout = None if command_timeout_steps is None else int(command_timeout_steps)
        self._limp_damping = float(limp_damping)
        zero = np.zeros(n)
        self._active = self._check(hold) if hold is not None else JointCommand(zero, zero, zero, zero, zero)
        self._active_since: int | None = None
        self._pending: deque[tuple[int, JointCommand]] = deque()
        self._samples: deque[PlantSample] = deque(maxlen=self._meas_delay + 1)
        self._tau = np.zeros(sim.nv)  # applied generalised force, 0 on unactuated dofs
        stribeck = stribeck_numerics(sim)
        #: dofs with Stribeck friction, their Fs [N·m] and q̇s [rad/s]
        self._stribeck = (np.array(sorted(stribeck), dtype=int),
                          np.array([stribeck[d][0] for d in sorted(stribeck)]),
                          np.array([stribeck[d][1] for d in sorted(stribeck)]))
        sigmoid = sigmoid_numerics(sim)
        #: dofs with sigmoid friction and their (φ1 [N·m], φ2 [s/rad], φ3 [rad/s]) (k, 3)
        self._sigmoid = (np.array(sorted(sigmoid), dtype=int),
                         np.array([sigmoid[d] for d in sorted(sigmoid)], dtype=float).reshape(-1, 3))
        self.step_count = 0
        self.counters = {"saturated_steps": 0, "limp_steps": 0}
        self.failure = ""  # why the physics stopped (see _diverged); '' while it runs
        self._pushes: list[tuple[int, int, int, np.ndarray]] = []  # (first, stop, body id, wrench (6,))
        for push in pushes:
            self.add_push(push)

    @classmethod
    def of(cls, model: RobotModel, mj: mujoco.MjModel | None = None, **options) -> MitPlant:
        """The plant of ``model``'s hinge/slide joints saturated at their motors' torque limits
        (:meth:`RobotModel.torque_limits`: ``actuatorfrcrange``, else the Damiao motor's TMAX),
        simulating ``mj`` (default: the model's own; a model with the same joints, e.g. with a
        payload). ``options``: the constructor's."""
        options.setdefault("torque_limit", model.torque_limits()[model.dof_indices])
        ids = model.mj.dof_jntid[model.dof_indices]
        return cls(model.mj if mj is None else mj, joints=[int(i) for i in ids], **options)

    # ------------------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        """Simulated time [s] of the next step."""
        return self.step_count * self.timestep

    def set_state(self, *, qpos: np.ndarray | None = None, qvel: np.ndarray | None = None,
                  q: np.ndarray | None = None, dq: np.ndarray | None = None, forward: bool = False) -> None:
        """Set the whole ``qpos (nq,)``/``qvel (nv,)`` and/or the actuated joints' ``q``/``dq``
        ``(n,)``; ``forward``: recompute MuJoCo's derived quantities (``mj_forward``)."""
        if qpos is not None:
            self.data.qpos[:] = qpos
        if qvel is not None:
            self.data.qvel[:] = qvel
        if q is not None:
            self.data.qpos[self._qadr] = q
        if dq is not None:
            self.data.qvel[self._dofs] = dq
        if forward:
            mujoco.mj_forward(self.mj, self.data)

    @property
    def mode(self) -> str:
        """"hold" | "command" | "limp" at the next step (before commands due then take effect)."""
        since = self._active_since
        if since is None:
            return "hold"
        return "limp" if self._timeout is not None and self.step_count - since > self._timeout else "command"

    @property
    def latest_command(self) -> JointCommand:
        """The last command sent (still pending or acting), else the hold command."""
        return self._pending[-1][1] if self._pending else self._active

    def add_push(self, push: Push) -> None:
        """Apply ``push`` during its window (steps counted from 0; one already over does nothing)."""
        body = mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_BODY, push.body)
        if body <= 0:
            raise SysIdError(f"push: no body {push.body!r} in the simulated model")
        first, stop = push.steps(self.timestep)
        self._pushes.append((first, stop, body, np.array([*push.force, *push.torque])))

    def _apply_pushes(self, k: int) -> None:
        """``xfrc_applied`` of step ``k``: the sum of the pushes acting then (zero otherwise)."""
        frc = self.data.xfrc_applied
        frc[:] = 0.0
        for first, stop, body, wrench in self._pushes:
            if first <= k < stop:
                frc[body] += wrench

    # ------------------------------------------------------------------------------ stepping
    def send(self, command: JointCommand) -> None:
        """Queue a command; it acts from step ``step_count + command_delay_steps`` on and is held
        until the next one (the arrays are kept, not copied)."""
        self._pending.append((self.step_count + self._cmd_delay, self._check(command)))

    def step(self, command: JointCommand | None = None, *, measure_torque: bool = True) -> PlantSample | None:
        """Send ``command`` (if any), then advance one step under the command acting now. Returns
        the measurement due now (``None`` while the measurement delay fills). ``measure_torque``
        False: the torque sensor is skipped this step (``tau`` is the applied torque, no noise
        drawn)."""
        if command is not None:
            self.send(command)
        k = self.step_count
        pending = self._pending
        while pending and pending[0][0] <= k:
            self._active_since, self._active = pending.popleft()
        q, dq = self._measure()
        mode = self.mode
        if mode == "limp":
            tau = -self._limp_damping * dq
            self.counters["limp_steps"] += 1
        else:
            tau = mit_torque(self._active, q, dq)
        applied = tau.clip(self._neg_limit, self.torque_limit)
        saturated = applied != tau
        if saturated.any():
            self.counters["saturated_steps"] += 1
        measured = self._measure_torque(applied) if measure_torque else applied
        sample = PlantSample(k, q, dq, measured, applied, saturated, mode)
        self._advance(applied)
        if not self._meas_delay:
            return sample
        self._samples.append(sample)
        return self._samples[0] if len(self._samples) > self._meas_delay else None

    def step_torque(self, tau: np.ndarray) -> None:
        """Advance one step under joint torques ``tau (n,)`` [N·m] as given, for a motor model that
        computes and saturates its own (the emulator's firmware); no sensor model."""
        self._advance(tau)

    def run(self, position: np.ndarray, velocity: np.ndarray, effort: np.ndarray, kp: np.ndarray,
            kd: np.ndarray, *, decimation: int = 1) -> SimulatedRun:
        """Step once per row of the commands (``(K, n)``; ``kp``/``kd`` ``(n,)`` or ``(K, n)``),
        the row of step k acting from step k + ``command_delay_steps`` (the hold command before),
        and record every ``decimation``-th step with the true state and acceleration
        (:class:`SimulatedRun`). The rows bypass :meth:`send`'s queue and its watchdog; without a
        measurement delay only."""
        if self._meas_delay:
            raise SysIdError("run() records without a measurement delay; step() returns delayed samples")
        if decimation < 1:
            raise SysIdError(f"decimation must be >= 1, got {decimation}")
        steps, n = position.shape[0], self.n
        kp = np.broadcast_to(kp, (steps, n))
        kd = np.broadcast_to(kd, (steps, n))
        if self._compiled_run_possible():
            run = self._run_compiled(position, velocity, effort, kp, kd, decimation)
            if run is not None:
                return run
        data, qadr, dofs = self.data, self._qadr, self._dofs
        n_rec = (steps + decimation - 1) // decimation
        rec = {k: np.empty((n_rec, self.mj.nv)) for k in ("dq", "ddq", "tau", "dq_true")}
        rec["q"], rec["q_true"] = np.empty((n_rec, self.mj.nq)), np.empty((n_rec, self.mj.nq))
        sat = np.zeros((n_rec, n), dtype=bool)
        delay, hold = self._cmd_delay, self._active
        for k in range(steps):
            j = k - delay
            command = JointCommand(position[j], velocity[j], effort[j], kp[j], kd[j]) if j >= 0 else hold
            q, dq = self._measure()
            tau = mit_torque(command, q, dq)
            applied = tau.clip(self._neg_limit, self.torque_limit)
            record = k % decimation == 0
            if record:
                i = k // decimation
                rec["q"][i], rec["dq"][i] = data.qpos, data.qvel
                rec["q"][i, qadr], rec["dq"][i, dofs] = q, dq
                rec["q_true"][i], rec["dq_true"][i] = data.qpos, data.qvel
                rec["tau"][i] = 0.0
                rec["tau"][i, dofs] = self._measure_torque(applied)
                sat[i] = applied != tau
            acc = self._advance(applied, acceleration=True)
            if record:
                rec["ddq"][i] = acc
        return SimulatedRun(rec["q"], rec["dq"], rec["ddq"], rec["tau"], sat, rec["q_true"], rec["dq_true"])

    @property
    def _numerics_friction(self) -> bool:
        """Whether the model's numerics add friction forces (Stribeck, sigmoid) to every step."""
        return bool(self._stribeck[0].size or self._sigmoid[0].size)

    def _compiled_run_possible(self) -> bool:
        """Whether :meth:`run` may step in compiled code (:mod:`~sysid_ros.core.sim.compiled_loop`):
        what that loop does is all there is to do (ideal sensors, no command delay, pushes,
        friction forces of the model's numerics or RK4) and this MuJoCo build exposes what it needs."""
        from sysid_ros.core.sim import compiled_loop

        return (self._ideal and not self.sensor.torque_noise and not self._cmd_delay
                and not self._pushes and not self._numerics_friction and not self._rk4
                and not self.failure and compiled_loop.available(self.mj, self.data))

    def _run_compiled(self, position: np.ndarray, velocity: np.ndarray, effort: np.ndarray,
                      kp: np.ndarray, kd: np.ndarray, decimation: int) -> SimulatedRun | None:
        """:meth:`run`'s loop in compiled code, the same states bit for bit; None (state restored)
        when MuJoCo flagged a divergence, for the Python loop to run again and say where."""
        from sysid_ros.core.sim.compiled_loop import step_closed_loop

        data = self.data
        start = (data.qpos.copy(), data.qvel.copy(), data.qacc_warmstart.copy(), data.time)
        counts = [int(w.number) for w, _ in self._divergence]
        dofs, qadr = np.atleast_1d(self.dof_indices), np.atleast_1d(self.qpos_indices)
        qpos, qvel, qacc, applied, saturated = step_closed_loop(
            self.mj, data, position, velocity, effort, kp, kd, self.torque_limit, dofs, qadr, decimation)
        if ([int(w.number) for w, _ in self._divergence] != counts
                or not (math.isfinite(qpos.sum()) and math.isfinite(data.qpos.sum()))):
            data.qpos[:], data.qvel[:], data.qacc_warmstart[:], data.time = start
            for (warning, _), count in zip(self._divergence, counts, strict=True):
                warning.number = count
            return None
        self.step_count += position.shape[0]
        tau = np.zeros((qpos.shape[0], self.mj.nv))
        tau[:, dofs] = applied
        return SimulatedRun(qpos, qvel, qacc, tau, saturated, qpos.copy(), qvel.copy())

    # ------------------------------------------------------------------------------ internals
    def _check(self, command: JointCommand) -> JointCommand:
        for name, value in zip(JointCommand._fields, command, strict=True):
            if np.shape(value) != (self.n,):
                raise DataError(f"command {name}: expected shape ({self.n},), got {np.shape(value)}")
        return command

    def _measure(self) -> tuple[np.ndarray, np.ndarray]:
        """Measured ``(q, dq)`` of the actuated joints: noise, then quantisation of the position."""
        q = self.data.qpos[self._qadr].copy()
        dq = self.data.qvel[self._dofs].copy()
        if not self._ideal:
            s, rng = self.sensor, self._rng
            q += s.position_noise * rng.standard_normal(self.n)
            if s.encoder_resolution > 0:
                q = np.round(q / s.encoder_resolution) * s.encoder_resolution
            dq += s.velocity_noise * rng.standard_normal(self.n)
        return q, dq

    def _measure_torque(self, applied: np.ndarray) -> np.ndarray:
        noise = self.sensor.torque_noise
        return applied + noise * self._rng.standard_normal(self.n) if noise else applied

    def _advance(self, tau: np.ndarray, *, acceleration: bool = False) -> np.ndarray | None:
        """Apply ``tau (n,)`` for one step. ``acceleration``: return the forward-dynamics
        acceleration ``(nv,)`` at the state before the step (RK4 overwrites it: computed first)."""
        if self.failure:
            raise SimulationError(self.failure)
        data = self.data
        self._tau[self._dofs] = tau
        data.qfrc_applied[:] = self._tau
        if self._pushes:
            self._apply_pushes(self.step_count)
        dofs, fs, velocity = self._stribeck
        if dofs.size:
            data.qfrc_applied[dofs] -= fs * _columns().stribeck_column(data.qvel[dofs], velocity)
        dofs, phi = self._sigmoid
        if dofs.size:
            data.qfrc_applied[dofs] -= phi[:, 0] * _columns().sigmoid_column(data.qvel[dofs], phi[:, 1],
                                                                            phi[:, 2])
        acc = None
        if acceleration and self._rk4:
            mujoco.mj_forward(self.mj, data)
            acc = data.qacc.copy()
            mujoco.mj_step(self.mj, data)
        else:
            mujoco.mj_step(self.mj, data)  # Euler: qacc is the pre-step acceleration
            if acceleration:
                acc = data.qacc
        k = self.step_count
        self.step_count = k + 1
        for warning, what in self._divergence:
            if warning.number:
                self._diverged(k, what, int(warning.lastinfo))
        if not math.isfinite(data.qpos.sum()):
            raise SimulationError(f"the simulation diverged at step {k} (t={k * self.timestep:.3f} s)")
        return acc

    def _diverged(self, k: int, what: str, dof: int) -> None:
        """MuJoCo flagged a bad ``what`` at ``dof`` during step ``k`` and reset the data: the plant
        stops for good (:attr:`failure` says why; every later step raises again) and raises
        :class:`SimulationError` — a reset state is not the robot's and must not be measured."""
        for warning, _ in self._divergence:
            warning.number = 0
        joint = int(self.mj.dof_jntid[dof]) if 0 <= dof < self.mj.nv else -1
        name = (mujoco.mj_id2name(self.mj, mujoco.mjtObj.mjOBJ_JOINT, joint) or f"joint {joint}"
                if joint >= 0 else "?")
        self.failure = (
            f"the physics diverged at step {k} (t={k * self.timestep:.3f} s): MuJoCo found a NaN, "
            f"infinite or huge (> 1e10) {what} at dof {dof} (joint {name!r}) and reset the robot to its "
            f"reference pose; stopped (too stiff gains or too large torques for the {self.timestep:g} s "
            "time step?)")
        raise SimulationError(self.failure)


def _joint_ids(mj: mujoco.MjModel, joints: Sequence[str | int] | None) -> np.ndarray:
    """Joint ids of ``joints`` (names or ids), each a hinge or slide joint; default every one."""
    if joints is None:
        ids = [j for j in range(mj.njnt) if int(mj.jnt_type[j]) in _HINGE_OR_SLIDE]
        return np.array(sorted(ids, key=lambda j: int(mj.jnt_dofadr[j])), dtype=int)
    out = []
    for j in joints:
        jid = (mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j) if isinstance(j, str)
               else int(j) if 0 <= int(j) < mj.njnt else -1)
        if jid < 0 or int(mj.jnt_type[jid]) not in _HINGE_OR_SLIDE:
            raise SysIdError(f"joint {j!r} is no hinge/slide joint")
        out.append(jid)
    return np.array(out, dtype=int)


def _as_slice(indices: np.ndarray) -> slice | np.ndarray:
    """``indices`` as a slice when they are contiguous and increasing (a view, no gather)."""
    idx = np.asarray(indices, dtype=int)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx


def _copy(mj: mujoco.MjModel) -> mujoco.MjModel:
    return copy.deepcopy(mj)
