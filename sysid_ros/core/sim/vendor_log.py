"""Logs as a vendor's controller records them, simulated with a known truth.

Most arms are identified from their own controller's logs, not from a bridge we run: the arm is
velocity controlled, the stamps are irregular (a soft real-time logger alternating periods) with
dropped cycles, the logged effort is a motor current, some joints only ever turn one way, and the
model file carries joint terms (armature, damping) that are guesses. :func:`vendor_log` makes such
a log from a MuJoCo simulation of a *true* robot that differs from the model, so that every step
of the pipeline can be checked against the truth.

What real logs of commercial arms add (issue 22), each a field of :class:`VendorStyle`: links whose
CAD inertia is 30 % off (``cad_off``), joints the excitation barely moves so that the masses beyond
them cannot be told apart (``amplitude``), per-joint drive gains (``torque_per_amp``), a logger
clock read with jitter at the real rate (``stamp_jitter``), dropped cycles (``dropped``) and one
longer gap (``gaps``, e.g. 8.54 ms). :data:`REAL_LIKE_7DOF` is such a log of a 7-DOF arm at 1 kHz.
A held-out log of the *same* robot along another motion: the same ``seed``, another
``motion_seed``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.data.fourier import FourierTrajectory, Limits
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import (
    JOINT_FIELDS,
    RobotModel,
    body_params_from_inertial,
    inertial_from_body_params,
)
from sysid_ros.core.sim.plant import SensorModel
from sysid_ros.core.sim.simulation import default_gains, simulate_mit
from sysid_ros.core.sim.synthetic import randomize

__all__ = ["REAL_LIKE_7DOF", "OneWayTrajectory", "VendorStyle", "vendor_log"]


@dataclass(frozen=True)
class VendorStyle:
    """How the simulated log differs from a clean one (SI units).

    ``periods`` [s]: the stamp steps, cycled (e.g. alternating 10 and 12 ms); each a multiple of
    ``physics_step``. ``dropped``: single log cycles left out, spread over the log.
    ``velocity_gain`` [N·m·s/rad]: per joint (or one) gain of the velocity loop
    ``τ = kv (q̇_ref + k_o (q_ref − q) − q̇) + τ_ff`` (None: the damping gain of
    :func:`~sysid_ros.core.sim.simulation.default_gains` at 10 Hz on the true robot), with the
    host's outer position loop ``position_gain`` k_o [1/s] (a velocity-controlled arm driven
    along a path, e.g. UR's ``speedj``; 0: none, the joints then drift): a PD law with
    ``kp = kv·k_o``, ``kd = kv``.
    ``torque_per_amp`` [N·m/A]: the log holds ``(τ + offset) / torque_per_amp`` (one or per
    joint). ``offset`` [N·m] per joint (or one): a torque-sensing offset. ``coulomb``/``viscous``
    [N·m], [N·m·s/rad]: the true joint friction (one or per joint). ``one_way``: joints that turn
    one way only, at ``one_way_speed`` [rad/s] on average. ``parameter_error``: the true inertial
    parameters and armature differ from the model's by up to this ratio (``synthetic.randomize``).
    ``noise``: measurement noise.

    ``cad_off``: bodies whose true mass and inertia (about the CoM) are ``1 + cad_off_ratio`` times
    what the randomised truth would have (the CAD model of those links is that far off; applied
    after ``parameter_error``). ``amplitude``: per joint (or one) factor on the excitation's
    Fourier coefficients (0: the joint holds its start position; small: the masses beyond it are
    barely separable). ``stamp_jitter`` [s]: standard deviation of the logged stamps around the
    true sampling instants (the logger reads its clock late or early; stamps stay increasing).
    ``gaps``: ``(time [s], length [s])`` spans with no sample (a logger stall): the samples
    stamped strictly inside ``(time, time + length)`` are left out.
    """

    periods: tuple[float, ...] = (0.010, 0.012)
    dropped: int = 4
    velocity_gain: float | tuple[float, ...] | None = None
    torque_per_amp: float | tuple[float, ...] = 10.0
    offset: float | tuple[float, ...] = 0.5
    coulomb: float | tuple[float, ...] = 1.0
    viscous: float | tuple[float, ...] = 0.5
    one_way: tuple[str, ...] = ()
    one_way_speed: float = 0.3
    position_gain: float = 5.0
    parameter_error: float = 0.2
    physics_step: float = 0.0005
    noise: SensorModel = field(default_factory=SensorModel)
    cad_off: tuple[str, ...] = ()
    cad_off_ratio: float = 0.3
    amplitude: float | tuple[float, ...] = 1.0
    stamp_jitter: float = 0.0
    gaps: tuple[tuple[float, float], ...] = ()


#: a 7-DOF arm's controller log at 1 kHz as the issue-22 logs look (use with test/robots/panda.xml
#: or gen3.xml): drive gains per joint (currents logged), the logger's clock jittered by 40 µs, 6
#: dropped cycles and one 8 ms stall after 4.965 s, the upper arm's and the forearm's CAD
#: inertia 30 % off, the last wrist joint barely moved (its masses not separable), joint friction
#: and sensing offsets the model file does not have, current noise.
REAL_LIKE_7DOF = VendorStyle(
    periods=(0.001,), dropped=6, torque_per_amp=(11.0, 11.0, 9.0, 9.0, 4.5, 4.5, 4.0),
    offset=(0.4, -0.3, 0.2, 0.3, -0.1, 0.1, 0.05), coulomb=(0.6, 0.5, 0.45, 0.4, 0.25, 0.3, 0.2),
    viscous=(0.6, 0.5, 0.45, 0.4, 0.15, 0.15, 0.1), position_gain=5.0, parameter_error=0.1,
    physics_step=0.0005, noise=SensorModel(0.0, 0.002, 0.05, 0.0, 7),
    cad_off=("link2", "link4"), cad_off_ratio=0.3, amplitude=(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.08),
    stamp_jitter=4e-5, gaps=((4.9651, 0.0075),))


@dataclass(frozen=True)
class OneWayTrajectory:
    """A Fourier trajectory whose ``joints`` (indices) turn one way: ``q_j = q0_j + v t +
    k (f_j(t) − f_j(0))`` with ``k`` small enough that ``q̇_j ≥ 0.3 v`` throughout ``[0, duration]``
    (``f_j`` the Fourier motion). Has the :class:`FourierTrajectory` interface ``q0`` and
    ``evaluate(t) -> (q, q̇, q̈)``."""

    base: FourierTrajectory
    joints: tuple[int, ...]
    speed: float
    duration: float

    @property
    def q0(self) -> np.ndarray:
        return self.base.q0

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, dq, ddq = (np.array(a) for a in self.base.evaluate(t))
        _, dq_grid, _ = self.base.evaluate(np.linspace(0.0, self.duration, 4000))
        for j in self.joints:
            k = min(1.0, 0.7 * self.speed / max(float(np.max(np.abs(dq_grid[:, j]))), 1e-12))
            q[:, j] = self.base.q0[j] + self.speed * t + k * (q[:, j] - self.base.q0[j])
            dq[:, j] = self.speed + k * dq[:, j]
            ddq[:, j] = k * ddq[:, j]
        return q, dq, ddq


def _per_joint(value: float | tuple[float, ...], n: int, name: str) -> np.ndarray:
    out = np.broadcast_to(np.asarray(value, dtype=float), (n,)) if np.ndim(value) == 0 else \
        np.asarray(value, dtype=float)
    if out.shape != (n,) or not np.all(np.isfinite(out)):
        raise SysIdError(f"{name}: expected one finite value or {n} (one per joint), got {value!r}")
    return np.array(out)


def _cad_off(full: RobotModel, theta: np.ndarray, bodies: tuple[str, ...], ratio: float) -> np.ndarray:
    """``theta`` with the mass and the inertia about the CoM of ``bodies`` scaled by 1 + ``ratio``
    (CoM kept)."""
    out = theta.copy()
    known = [full.body_name(b) for b in full.param_bodies]
    unknown = [b for b in bodies if b not in known]
    if unknown:
        raise SysIdError(f"cad_off bodies {unknown} are not bodies of the model ({known})")
    if not (np.isfinite(ratio) and ratio > -1):
        raise SysIdError(f"cad_off_ratio must be a finite number > -1, got {ratio}")
    for name in bodies:
        sl = full.body_slice(full.body_id(name))
        mass, com, inertia = inertial_from_body_params(out[sl])
        out[sl] = body_params_from_inertial(mass * (1 + ratio), com, inertia * (1 + ratio))
    return out


def _stamps(t: np.ndarray, style: VendorStyle, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(kept (k,), stamps (k,))``: which sampling instants ``t`` survive ``style.gaps`` and the
    stamps logged for them (jittered by ``style.stamp_jitter``, kept increasing)."""
    keep = np.ones(len(t), dtype=bool)
    for start, length in style.gaps:
        if not (np.isfinite(start) and np.isfinite(length) and length > 0):
            raise SysIdError(f"a gap is (time [s], length > 0 [s]), got {(start, length)}")
        keep &= ~((t > start) & (t < start + length))
    kept = np.flatnonzero(keep)
    stamps = t[kept].copy()
    if style.stamp_jitter > 0:
        if not np.isfinite(style.stamp_jitter):
            raise SysIdError(f"stamp_jitter must be a finite number >= 0 s, got {style.stamp_jitter}")
        # at most 40 % of the shortest period either way: the stamps stay in order
        bound = 0.4 * float(np.min(np.diff(t))) if len(t) > 1 else 0.0
        stamps = stamps + np.clip(rng.normal(0.0, style.stamp_jitter, len(stamps)), -bound, bound)
        stamps[0] = max(stamps[0], t[kept[0]])  # a recording starts at its first instant, not before
    return kept, stamps


def vendor_log(model: RobotModel, style: VendorStyle, *, duration: float = 20.0, seed: int = 0,
               clean: bool = False, motion_seed: int | None = None) -> Dataset:
    """Simulate a vendor-style log of the arm ``model`` (hinge joints, fixed base).

    The true robot is ``model`` with its inertials and armature randomised by
    ``style.parameter_error`` and the joint friction of ``style``; it is velocity controlled along a random
    excitation (``seed``) with the nominal model's feed-forward. Returns the log (``tau`` the
    logged current, ``command`` the recorded reference with unknown gains, NaN) with its truth
    (``truth["parameters"]`` in the model's layout with every joint term, ``truth["log"]`` what
    was done to the log) and the true motion in ``meta`` at the logged stamps.

    ``clean=True``: the same run logged as a bridge would: every physics step, torque in N·m
    (the offset stays: it is the robot's), the reference for "within 10 % of the clean log".
    ``motion_seed``: the excitation's seed (default ``seed``, which also draws the true robot): a
    held-out log of the same robot is ``vendor_log(model, style, seed=s, motion_seed=other)``.
    """
    if model.nq != model.nv:
        raise SysIdError("vendor logs are simulated for fixed-base arms of hinge/slide joints")
    n = model.nv
    names = model.dof_joint_names
    rng = np.random.default_rng(seed)
    full = RobotModel(model.mj, joint_terms=JOINT_FIELDS, source=model.source)
    theta = randomize(full, full.nominal, style.parameter_error, rng)
    theta = _cad_off(full, theta, style.cad_off, style.cad_off_ratio)
    terms = {"Fc": _per_joint(style.coulomb, n, "coulomb"), "Fv": _per_joint(style.viscous, n, "viscous"),
             "Fo": _per_joint(style.offset, n, "offset")}
    for term, values in terms.items():
        for j, name in enumerate(names):
            theta[full.index(f"{name}.{term}")] = values[j]
    truth_mj = copy.deepcopy(model.mj)
    full.apply_to(truth_mj, theta)
    dt = float(style.physics_step)
    steps = [round(p / dt) for p in style.periods]
    if not style.periods or min(steps) < 1 or any(abs(s * dt - p) > 1e-9 for s, p in zip(steps, style.periods,
                                                                                          strict=True)):
        raise SysIdError(f"the stamp periods {style.periods} must be multiples of the physics step {dt} s")
    base = FourierTrajectory.random(Limits.of(model), harmonics=5, period=10.0,
                                    seed=seed if motion_seed is None else motion_seed)
    base = base.scaled(_per_joint(style.amplitude, n, "amplitude"))
    unknown = [j for j in style.one_way if j not in names]
    if unknown:
        raise SysIdError(f"one-way joints {unknown} are not joints of the model ({list(names)})")
    trajectory = OneWayTrajectory(base, tuple(names.index(j) for j in style.one_way),
                                  style.one_way_speed, duration) if style.one_way else base
    if style.velocity_gain is None:
        # a stiff velocity loop (10 Hz on the true robot's inertia), as vendor drives have
        _, kv = default_gains(RobotModel(truth_mj, source=model.source), bandwidth_hz=10.0)
    else:
        kv = _per_joint(style.velocity_gain, n, "velocity_gain")
    kp = np.asarray(kv, dtype=float) * float(style.position_gain)
    rec = simulate_mit(model, trajectory, duration, kp=kp, kd=kv, truth=truth_mj, sensor=style.noise,
                       timestep=dt)
    if clean:
        index = np.arange(len(rec.t))
        logged_tau = rec.tau + terms["Fo"]
    else:
        cycle = np.cumsum(np.resize(steps, len(rec.t)))
        index = np.concatenate(([0], cycle[cycle < len(rec.t)]))
        if style.dropped:
            drop = np.linspace(0, len(index) - 1, style.dropped + 2).round().astype(int)[1:-1]
            index = np.delete(index, drop)
        gain = _per_joint(style.torque_per_amp, n, "torque_per_amp")
        if np.any(gain == 0):
            raise SysIdError("torque_per_amp must be non-zero for every joint")
        logged_tau = (rec.tau + terms["Fo"]) / gain
    kept, stamps = _stamps(rec.t[index], VendorStyle() if clean else style,
                           np.random.default_rng([seed, 22]))
    index = index[kept]
    # the simulated torque is the applied motor torque; the true model's Fo is a sensing offset
    # (in both logs: it belongs to the robot, not to the logger)
    command = CommandLog(stamps, rec.q_ref[index], rec.dq_ref[index], rec.tau_ff[index],
                         np.full((len(index), n), np.nan), np.full((len(index), n), np.nan))
    log_doc = {"periods": list(style.periods), "dropped": int(style.dropped), "clean": clean,
               "velocity_gain": np.asarray(kv, dtype=float).tolist(),
               "position_gain": float(style.position_gain),
               "torque_per_amp": None if clean else _per_joint(style.torque_per_amp, n, "").tolist(),
               "one_way": list(style.one_way), "cad_off": list(style.cad_off),
               "cad_off_ratio": float(style.cad_off_ratio),
               "amplitude": _per_joint(style.amplitude, n, "amplitude").tolist(),
               "stamp_jitter": 0.0 if clean else float(style.stamp_jitter),
               "gaps": [] if clean else [list(map(float, g)) for g in style.gaps],
               "motion_seed": seed if motion_seed is None else motion_seed}
    truth = {"model": model.source, "parameters": full.as_dict(theta), "log": log_doc,
             "seed": seed, "duration": duration}
    tau_true = rec.tau[index] + terms["Fo"]
    q_true = rec.q_true if rec.q_true is not None else rec.q
    dq_true = rec.dq_true if rec.dq_true is not None else rec.dq
    return Dataset(stamps, names, rec.q[index], rec.dq[index], logged_tau[index],
                   source=f"vendor-style log of {Path(model.source or 'model').name}", command=command,
                   truth=truth, meta={"q_true": q_true[index], "dq_true": dq_true[index],
                                      "ddq_true": rec.ddq[index], "tau_true": tau_true,
                                      "t_true": rec.t[index]})
