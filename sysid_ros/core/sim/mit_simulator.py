"""A robot in MuJoCo obeying the Damiao MIT law, stepped one physics step at a time: the core of
the ``mujoco_sim`` node (no ROS here).

Per actuated joint ``τ = kp (q* − q) + kd (q̇* − q̇) + τ_ff``, saturated at the motor's torque
limit, computed from the *measured* state (noise, encoder quantisation) like real motors do. The
last command is held when commands stop; after ``command_timeout`` of silence the joints go limp
(zero torque plus ``limp_damping``), as a motor whose CAN watchdog expired. Before the first
command the robot holds its initial pose with the default gains (a powered arm at rest).
Commands carry a stamp [s, simulated time]: a command takes effect one physics period after
its stamp (the controller's one-step latency: the command answering the state measured at
``t_k`` acts from the step starting at ``t_k + 1/rate``); one that arrives later than that takes
effect at the next step. So a stamped command stream gives the same motion however late it is
delivered, as long as it is delivered before it is due — what a lockstep simulation waits for
(:attr:`MitSimulator.command_horizon`). Commands and measurements can further be delayed by
whole physics steps (``command_delay``, ``measurement_delay``). The physics, the law, the
saturation and the sensor model are :class:`~sysid_ros.core.sim.plant.MitPlant`'s; this class adds
joint names, command validation and merging, the initial hold and the true parameters.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import BODY_FIELDS, RobotModel
from sysid_ros.core.sim.plant import JointCommand, MitPlant, Push, SensorModel
from sysid_ros.core.sim.simulation import default_gains
from sysid_ros.core.sim.synthetic import Payload, floating_base, true_parameters, with_payload

__all__ = ["MAX_COMMAND_MAGNITUDE", "JointSample", "MitSimulator", "SimOptions"]

#: largest magnitude of any commanded position [rad], velocity [rad/s], torque [N·m] or gain
#: (metres and newtons for slide joints) :meth:`MitSimulator.command` takes; far above any
#: motor's (a Damiao motor: 12.5 rad, 45 rad/s, 200 N·m, kp 500, kd 5), low enough that the MIT
#: law's torque from a finite state is finite
MAX_COMMAND_MAGNITUDE = 1e6


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
    the samples match the torques) or "rk4" (for free-floating runs); ``pushes``: external
    wrenches (unexpected contacts, :class:`~sysid_ros.core.sim.plant.Push`, simulated time).
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
    pushes: tuple[Push, ...] = ()


class JointSample(NamedTuple):
    """One measurement: time [s], measured ``q``, ``dq`` and applied torque ``tau`` (each
    ``(n,)`` in :attr:`MitSimulator.joint_names` order); ``mode`` "hold" | "command" | "limp"."""

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    mode: str


class MitSimulator:
    """Step a robot under MIT-mode commands. ``model``: the bare robot (what the controller
    knows); the simulated robot adds the options' payload, floating base, friction choices."""

    def __init__(self, model: RobotModel, options: SimOptions | None = None) -> None:
        self.options = opt = options or SimOptions()
        if not opt.rate > 0:
            raise SysIdError(f"the physics rate must be positive, got {opt.rate}")
        self.model = floating_base(model) if opt.floating_base else model
        sim = (with_payload(self.model, opt.payload) if opt.payload is not None
               else copy.deepcopy(self.model.mj))
        if not opt.joint_friction:
            sim.dof_frictionloss[:] = 0.0
            sim.dof_damping[:] = 0.0
        if not opt.armature:
            sim.dof_armature[:] = 0.0
        self.joint_names: tuple[str, ...] = self.model.dof_joint_names
        self._index = {n: i for i, n in enumerate(self.joint_names)}
        n = len(self.joint_names)
        lo, hi = (x[self.model.dof_indices] for x in self.model.joint_limits())
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
        start = mid if opt.initial_position is None else np.asarray(opt.initial_position, dtype=float)
        if start.shape != (n,):
            raise SysIdError(f"expected an initial position of the {n} joints, got {start.shape}")
        kp, kd = default_gains(self.model, start)
        self.plant = MitPlant.of(
            self.model, sim, copy=False, timestep=1.0 / opt.rate, sensor=opt.sensor,
            integrator=opt.integrator, command_delay_steps=round(opt.command_delay * opt.rate),
            measurement_delay_steps=round(opt.measurement_delay * opt.rate),
            command_timeout_steps=max(1, round(opt.command_timeout * opt.rate)),
            limp_damping=opt.limp_damping, hold=JointCommand(start.copy(), np.zeros(n), np.zeros(n), kp, kd),
            pushes=opt.pushes)
        self.mj, self.data = self.plant.mj, self.plant.data
        self.torque_limit = self.plant.torque_limit
        self.plant.set_state(q=start, forward=True)
        self._commands = 0
        self._pending: list = []  # heap of (step it takes effect, arrival order, names, arrays)
        self._arrivals = itertools.count()
        self.command_horizon = -np.inf

    # ---------------------------------------------------------------------------- properties
    @property
    def step_count(self) -> int:
        """Physics steps taken."""
        return self.plant.step_count

    @property
    def time(self) -> float:
        """Simulated time [s] of the next step."""
        return self.plant.step_count / self.options.rate

    @property
    def mode(self) -> str:
        """"hold" | "command" | "limp" (see the module docstring)."""
        return self.plant.mode

    @property
    def counters(self) -> dict[str, int]:
        """Commands taken, steps with a saturated joint, limp steps."""
        return {"commands": self._commands, **self.plant.counters}

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
    def command(self, names, position, velocity, effort, kp=(), kd=(), *, stamp: float | None = None) -> None:
        """Take an MIT command for the named joints (others keep theirs). Empty ``kp``/``kd``
        keep the current gains. ``stamp`` [s]: the command takes effect at the first step
        starting at or after ``stamp + 1/rate`` (``None``: at the next step); commands due at
        the same step apply in stamp order, then arrival order. An empty ``names`` list is a
        valid command that changes nothing (a controller saying it has seen the state).
        Raises :class:`DataError` (and changes nothing) on unknown names, mismatched lengths,
        non-finite values (stamp included) or magnitudes above :data:`MAX_COMMAND_MAGNITUDE`."""
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
            if np.any(np.abs(arr) > MAX_COMMAND_MAGNITUDE):
                raise DataError(f"{key}: expected magnitudes <= {MAX_COMMAND_MAGNITUDE:g}, "
                                f"got {arr.tolist()}")
            arrays[key] = arr
        if stamp is not None and not np.isfinite(stamp):
            raise DataError(f"stamp: non-finite {stamp}")
        idx = np.array([self._index[n] for n in names], dtype=int)
        due = self.step_count
        if stamp is not None:
            due = max(due, _first_step_after(stamp, self.options.rate))
        order = -np.inf if stamp is None else stamp
        heapq.heappush(self._pending, (due, order, next(self._arrivals), idx, arrays))
        if stamp is not None:
            self.command_horizon = max(self.command_horizon, stamp)
        self._commands += 1

    def _apply_due_commands(self) -> None:
        while self._pending and self._pending[0][0] <= self.step_count:
            _, _, _, idx, arrays = heapq.heappop(self._pending)
            self._apply(idx, arrays)

    def _apply(self, idx: np.ndarray, arrays: dict) -> None:
        if idx.size == 0:
            return
        new = [x.copy() for x in self.plant.latest_command]
        for slot, key in enumerate(("position", "velocity", "effort", "kp", "kd")):
            if arrays[key] is not None:
                new[slot][idx] = arrays[key]
        self.plant.send(JointCommand(*new))

    # ---------------------------------------------------------------------------------- step
    def step(self) -> JointSample | None:
        """Advance one physics step. Returns the measurement due now (``None`` while the
        measurement delay fills): the measured state before the step and the applied torque.
        Commands due at this step take effect first."""
        self._apply_due_commands()
        sample = self.plant.step()
        if sample is None:
            return None
        return JointSample(sample.step / self.options.rate, sample.q, sample.dq, sample.tau, sample.mode)


def _first_step_after(stamp: float, rate: float) -> int:
    """Index of the first step starting at or after ``stamp + 1/rate`` (times in seconds; a
    stamp on the step grid up to rounding counts as on it)."""
    return int(np.ceil(stamp * rate - 1e-6)) + 1
