"""The dual-metric seed's two experimental systems (arXiv 2603.14656 §IV), simulated, and the
methods it compares run on their regression data.

* ``floating``: inertia-dominated. A floating body with a pendulum on a universal joint (the
  Crazyflie–pendulum shape, §IV-A), simulated in MuJoCo (free joint + two hinges α1, α2). The body
  is pushed by a generalised force in all six of its directions (a PD tracking sinusoidal poses of
  mutually non-harmonic frequencies; the Crazyflie's thrust has one direction, a simplification),
  the universal joint is passive (τ = 0 on α1, α2). Coordinates as in the seed: the body velocity
  (linear and angular, body frame) and its rate of change, then α̇, α̈; τ = M(q) q̈ + h(q, q̇)
  linear in the three bodies' inertial parameters (10 each), metric M(q).
* ``chain``: drag-dominated. Three links in a plane joined by two passive joints α1, α2 (the
  LandSalp shape, §IV-B), in a viscous medium: τ = D(α) q̇ with q̇ = (middle link's body velocity
  v_x, v_y, ω; α̇1, α̇2) and D(α) = Σ_i J_iᵀ diag(c_i) J_i + diag(0, 0, 0, c_j1, c_j2) affine in
  the eleven drag coefficients (per link: along, across, rotation; per joint), J_i the link's body
  Jacobian; metric D(α). Each link carries a wheel pushing along a fixed direction of the link
  with a sinusoidal force (plus a weak pull of the shape toward straight, so the chain does not
  fold up), integrated as q̇ = D(α)⁻¹ τ.

Measurements (training): generalised forces and the coordinates' rates with Gaussian noise
(motion-capture differentiation, force sensing); the pose is exact. Held-out runs are noise-free:
the score measures the model. Numbers that are not the seed's are stated as such.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import mujoco
import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.batch.convex import least_squares_program
from sysid_ros.core.batch.dual_metric import dual_metric_program
from sysid_ros.core.model.regressor import mass_matrix_regressor, torque_regressor
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import Target, arm_target, coefficient_target
from sysid_ros.core.torque_errors import shifted_ncc

# Crazyflie 2.0: 27 g, inertia diag(1.395, 1.436, 2.173)·1e-5 kg·m² (J. Förster, "System
# identification of the Crazyflie 2.0 nano quadrocopter", ETH Zürich BSc thesis, 2015); the
# universal-joint core (2 g) and the pendulum (a 10 cm rod of 6 g; inertias above the convex
# programs' consistency margin, 1e-7 kg·m²) are this benchmark's choice
FLOATING_MJCF = """
<mujoco model="floating_pendulum">
  <compiler angle="radian"/>
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="body" pos="0 0 1">
      <freejoint name="base"/>
      <inertial pos="0 0 0.002" mass="0.027" diaginertia="1.395e-5 1.436e-5 2.173e-5"/>
      <body name="core" pos="0 0 -0.015">
        <joint name="alpha1" axis="1 0 0"/>
        <inertial pos="0 0 0" mass="0.002" diaginertia="1e-6 1e-6 1e-6"/>
        <body name="pendulum">
          <joint name="alpha2" axis="0 1 0"/>
          <inertial pos="0 0 -0.05" mass="0.006" diaginertia="5.2e-6 5.2e-6 6e-7"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
FLOATING_COORDS = ("vx", "vy", "vz", "wx", "wy", "wz", "alpha1", "alpha2")
SHAPE = ("alpha1", "alpha2")

#: chain: link length [m] and wheel force directions in each link's frame [rad]
CHAIN_LINK = 0.3
CHAIN_WHEELS = (np.pi / 3, np.pi / 2, 2 * np.pi / 3)
CHAIN_NAMES = (*(f"link{i}.{a}" for i in (1, 2, 3) for a in ("c_along", "c_across", "c_rot")),
               "joint1.c", "joint2.c")
#: [N·s/m, N·s/m, N·m·s] per link, [N·m·s] per joint: lateral drag 8× the axial one (a wheeled or
#: slender body), this benchmark's choice
CHAIN_TRUTH = np.array([0.6, 5.0, 0.04, 0.5, 4.0, 0.03, 0.7, 6.0, 0.05, 0.01, 0.015])
CHAIN_COORDS = ("vx", "vy", "w", "alpha1", "alpha2")


@dataclass(frozen=True)
class Run:
    """One run in the seed's coordinates, ``K`` samples of ``n`` coordinates.

    ``y (K, n, p)`` regressor and ``tau (K, n)`` forces (τ = Y θ), ``ym (K, n, n, p)`` the metric's
    regressor and ``m_known (K, n, n)`` its known part, ``rate (K, n)`` the coordinates' velocities
    (the energy method's pairing), ``signal (K, n)`` the forward-dynamics signal the models predict
    (accelerations of ``floating``, velocities of ``chain``) and ``rate_hz`` the sample rate."""

    y: np.ndarray
    tau: np.ndarray
    ym: np.ndarray
    m_known: np.ndarray
    rate: np.ndarray
    signal: np.ndarray
    rate_hz: float
    state: tuple  # what the system's forward dynamics needs besides θ and τ

    def subset(self, idx: np.ndarray) -> Run:
        return replace(self, y=self.y[idx], tau=self.tau[idx], ym=self.ym[idx],
                       m_known=self.m_known[idx], rate=self.rate[idx], signal=self.signal[idx],
                       state=tuple(s[idx] for s in self.state))

    def __len__(self) -> int:
        return len(self.tau)


def concatenate(runs: list[Run]) -> Run:
    first = runs[0]
    def cat(f):
        return np.concatenate([f(r) for r in runs])

    return replace(first, y=cat(lambda r: r.y), tau=cat(lambda r: r.tau), ym=cat(lambda r: r.ym),
                   m_known=cat(lambda r: r.m_known), rate=cat(lambda r: r.rate),
                   signal=cat(lambda r: r.signal),
                   state=tuple(np.concatenate([r.state[i] for r in runs]) for i in range(len(first.state))))


# ------------------------------------------------------------------------------ floating body
class FloatingPendulum:
    """The floating body with a pendulum on a universal joint, in body-velocity coordinates."""

    coords = FLOATING_COORDS
    #: slowest reference period [s] (yaw, 0.23 Hz): the NCC's shift window is ±5° of it
    slowest_period = 1 / 0.23

    def __init__(self):
        self.model = RobotModel.from_xml_string(FLOATING_MJCF, joint_terms=())
        self.truth = self.model.nominal.copy()
        self.body = self.model.mj.body("body").id

    def target(self, prior: np.ndarray | None = None) -> Target:
        return arm_target(self.model, prior=prior)

    def transform(self, q: np.ndarray) -> np.ndarray:
        """``T (K, 8, 8)``: body coordinates = T · MuJoCo's (whose free-joint linear velocity is in
        the world frame): blockdiag(Rᵀ, I₃, I₂), orthogonal, so forces map alike (τ_b = T τ)."""
        t = np.tile(np.eye(8), (len(q), 1, 1))
        quat = q[:, 3:7]
        for k in range(len(q)):
            r = np.zeros(9)
            mujoco.mju_quat2Mat(r, quat[k])
            t[k, :3, :3] = r.reshape(3, 3).T
        return t

    def regressor(self, q, v, dv) -> np.ndarray:
        """``Y_b (K, 8, p)`` with τ_b = Y_b θ at body velocity ``v`` and its rate ``dv`` (K, 8)."""
        t = self.transform(q)
        qvel = np.einsum("kba,kb->ka", t, v)  # Tᵀ v
        # d/dt (Rᵀ v_w) = Rᵀ a_w − ω × v_b: MuJoCo's linear acceleration from the body rate
        lin = dv[:, :3] + np.cross(v[:, 3:6], v[:, :3])
        qacc = np.einsum("kba,kb->ka", t, np.concatenate([lin, dv[:, 3:]], axis=1))
        return np.einsum("kab,kbp->kap", t, torque_regressor(self.model, q, qvel, qacc))

    def metric(self, q) -> tuple[np.ndarray, np.ndarray]:
        t = self.transform(q)
        ym = np.einsum("kab,kbcp,kdc->kadp", t, mass_matrix_regressor(self.model, q), t)
        return ym, np.zeros(ym.shape[:3])

    def predict(self, theta: np.ndarray, run: Run) -> np.ndarray:
        """Forward dynamics: body-velocity rates M_b(θ)⁻¹ (τ_b − h_b(θ)) ``(K, 8)``."""
        q, v = run.state
        m = np.einsum("kabp,p->kab", self.metric(q)[0], theta)
        bias = self.regressor(q, v, np.zeros_like(v)) @ theta
        return np.linalg.solve(m, (run.tau - bias)[..., None])[..., 0]

    def simulate(self, duration: float, seed: int, *, rate_hz: float = 100.0,
                 noise: dict | None = None) -> Run:
        """A run tracking sinusoidal poses (random phases from ``seed``); ``noise`` std of the
        measured ``force`` [N], ``torque`` [N·m], ``accel`` [m/s²], ``angular_accel`` [rad/s²]
        (body and shape), ``velocity`` [m/s and rad/s]."""
        mj = self.model.mj
        d = mujoco.MjData(mj)
        rng = np.random.default_rng(seed)
        phase = rng.uniform(0, 2 * np.pi, 6)
        freq = np.array([0.31, 0.43, 0.57, 0.37, 0.53, 0.23])  # x, y, z, roll, pitch, yaw [Hz]
        amp = np.array([0.4, 0.4, 0.25, 0.25, 0.25, 0.8])
        mass = float(mj.body_subtreemass[self.body])
        inertia = mj.body_inertia[self.body]
        decim = round(1 / (rate_hz * mj.opt.timestep))
        rec = {k: [] for k in ("q", "v", "dv", "tau")}
        for i in range(round(duration / mj.opt.timestep)):
            t = i * mj.opt.timestep
            w = 2 * np.pi * freq
            ref = amp * np.sin(w * t + phase)
            dref = amp * w * np.cos(w * t + phase)
            ddref = -amp * w**2 * np.sin(w * t + phase)
            pos, vel = d.qpos[:3] - np.array([0, 0, 1.0]), d.qvel[:3]
            force = mass * (ddref[:3] + 60.0 * (ref[:3] - pos) + 12.0 * (dref[:3] - vel)
                            + np.array([0, 0, 9.81]))
            r_ref = np.zeros(9)
            quat_ref = np.zeros(4)
            mujoco.mju_euler2Quat(quat_ref, ref[3:], "xyz")
            mujoco.mju_quat2Mat(r_ref, quat_ref)
            r = d.xmat[self.body].reshape(3, 3)
            e = r_ref.reshape(3, 3).T @ r
            e_r = 0.5 * np.array([e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1]])
            torque = inertia * (-400.0 * e_r - 40.0 * d.qvel[3:6])
            d.qfrc_applied[:6] = np.concatenate([force, torque])
            if i % decim == 0:
                mujoco.mj_forward(mj, d)
                rec["q"].append(d.qpos.copy())
                rec["tau"].append(d.qfrc_applied.copy())
                rec["v"].append(d.qvel.copy())
                rec["dv"].append(d.qacc.copy())
            mujoco.mj_step(mj, d)
        q = np.array(rec["q"])
        t_mat = self.transform(q)
        v = np.einsum("kab,kb->ka", t_mat, np.array(rec["v"]))
        dv = np.einsum("kab,kb->ka", t_mat, np.array(rec["dv"]))
        dv[:, :3] -= np.cross(v[:, 3:6], v[:, :3])
        tau = np.einsum("kab,kb->ka", t_mat, np.array(rec["tau"]))
        signal = dv.copy()
        if noise:
            k = len(q)
            tau[:, :3] += noise.get("force", 0.0) * rng.standard_normal((k, 3))
            tau[:, 3:6] += noise.get("torque", 0.0) * rng.standard_normal((k, 3))
            dv[:, :3] += noise.get("accel", 0.0) * rng.standard_normal((k, 3))
            dv[:, 3:] += noise.get("angular_accel", 0.0) * rng.standard_normal((k, 5))
            v += noise.get("velocity", 0.0) * rng.standard_normal(v.shape)
        ym, m_known = self.metric(q)
        return Run(self.regressor(q, v, dv), tau, ym, m_known, v, signal, rate_hz, (q, v))


# ------------------------------------------------------------------------------ viscous chain
def chain_jacobians(alpha: np.ndarray, length: float = CHAIN_LINK) -> np.ndarray:
    """``J (K, 3, 3, 5)``: body velocity (along, across, ω) of links 1–3 from q̇ = (v_x, v_y, ω of
    the middle link, α̇1, α̇2); link 1 hangs off the middle link's rear end at angle α1, link 3
    off its front end at angle α2, each joint at the end of both links."""
    k = len(alpha)
    jac = np.zeros((k, 3, 3, 5))
    jac[:, 1, :, :3] = np.eye(3)
    for link, sign, col in ((0, -1.0, 3), (2, 1.0, 4)):
        a = alpha[:, col - 3]
        c, s = np.cos(a), np.sin(a)
        half = 0.5 * length * sign
        # joint point (middle frame): (v_x, v_y + ω·half); centre = joint + R(α)(half, 0)
        rx, ry = half * c, half * s
        vel = np.zeros((k, 2, 5))  # centre velocity in the middle frame
        vel[:, 0, 0] = 1.0
        vel[:, 1, 1] = 1.0
        vel[:, 1, 2] = half
        for j in (2, col):  # ω_i = ω + α̇: ω_i × r = ω_i (−r_y, r_x)
            vel[:, 0, j] += -ry
            vel[:, 1, j] += rx
        jac[:, link, 0] = c[:, None] * vel[:, 0] + s[:, None] * vel[:, 1]  # R(α)ᵀ
        jac[:, link, 1] = -s[:, None] * vel[:, 0] + c[:, None] * vel[:, 1]
        jac[:, link, 2, 2] = 1.0
        jac[:, link, 2, col] = 1.0
    return jac


def drag_matrix_regressor(alpha: np.ndarray) -> np.ndarray:
    """``Y_D (K, 5, 5, 11)``: D(α) = Y_D c (:data:`CHAIN_NAMES` order)."""
    jac = chain_jacobians(alpha)
    yd = np.zeros((len(alpha), 5, 5, 11))
    for link in range(3):
        for axis in range(3):
            row = jac[:, link, axis]
            yd[..., 3 * link + axis] = row[:, :, None] * row[:, None, :]
    yd[:, 3, 3, 9] = 1.0
    yd[:, 4, 4, 10] = 1.0
    return yd


class ViscousChain:
    """The three-link chain in a viscous medium (drag-dominated)."""

    coords = CHAIN_COORDS
    #: slowest wheel period [s] (0.11 Hz)
    slowest_period = 1 / 0.11

    def __init__(self):
        self.truth = CHAIN_TRUTH.copy()

    def target(self, prior: np.ndarray | None = None) -> Target:
        alpha = np.random.default_rng(0).uniform(-1.0, 1.0, (200, 2))
        rows = np.einsum("kabp,kb->kap", drag_matrix_regressor(alpha),
                         np.random.default_rng(1).standard_normal((200, 5)))
        return coefficient_target(CHAIN_NAMES, self.truth if prior is None else prior, rows)

    def metric(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        yd = drag_matrix_regressor(alpha)
        return yd, np.zeros(yd.shape[:3])

    def predict(self, theta: np.ndarray, run: Run) -> np.ndarray:
        """Forward dynamics: velocities D(α; θ)⁻¹ τ ``(K, 5)``."""
        (alpha,) = run.state
        d = drag_matrix_regressor(alpha) @ theta
        return np.linalg.solve(d, run.tau[..., None])[..., 0]

    def forces(self, alpha: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Generalised forces ``(K, 5)`` of wheel forces ``u (K, 3)`` [N] along :data:`CHAIN_WHEELS`."""
        jac = chain_jacobians(alpha)
        wrench = np.zeros((len(alpha), 3, 3))
        wrench[..., 0] = u * np.cos(CHAIN_WHEELS)
        wrench[..., 1] = u * np.sin(CHAIN_WHEELS)
        return np.einsum("klap,kla->kp", jac, wrench)

    def simulate(self, duration: float, seed: int, *, rate_hz: float = 10.0,
                 noise: dict | None = None) -> Run:
        """Sinusoidal wheel forces (random phases from ``seed``), RK4 at 100 Hz, sampled at
        ``rate_hz``; ``noise`` std of the measured ``wheel_force`` [N] and ``velocity`` [m/s,
        rad/s]."""
        rng = np.random.default_rng(seed)
        freq = np.array([0.11, 0.17, 0.29])
        phase = rng.uniform(0, 2 * np.pi, 3)
        dt = 0.01

        def u_of(t, alpha):
            # wheel forces: sinusoids, minus a weak pull of the shape toward straight through the
            # outer wheels (the chain would otherwise fold up)
            u = 1.0 * np.sin(2 * np.pi * freq * t + phase)
            u[0] += 4.0 * alpha[0]
            u[2] -= 4.0 * alpha[1]
            return u

        def qdot(t, alpha):
            tau = self.forces(alpha[None], u_of(t, alpha)[None])
            return np.linalg.solve(drag_matrix_regressor(alpha[None])[0] @ self.truth, tau[0])

        alpha = np.zeros(2)
        decim = round(1 / (rate_hz * dt))
        rec_a, rec_u = [], []
        for i in range(round(duration / dt)):
            t = i * dt
            if i % decim == 0:
                rec_a.append(alpha.copy())
                rec_u.append(u_of(t, alpha))
            k1 = qdot(t, alpha)[3:]
            k2 = qdot(t + dt / 2, alpha + dt / 2 * k1)[3:]
            k3 = qdot(t + dt / 2, alpha + dt / 2 * k2)[3:]
            k4 = qdot(t + dt, alpha + dt * k3)[3:]
            alpha = alpha + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        alpha, u = np.array(rec_a), np.array(rec_u)
        yd = drag_matrix_regressor(alpha)
        tau = self.forces(alpha, u)
        vel = np.linalg.solve(yd @ self.truth, tau[..., None])[..., 0]
        signal = vel.copy()
        if noise:
            tau = self.forces(alpha, u + noise.get("wheel_force", 0.0) * rng.standard_normal(u.shape))
            vel = vel + noise.get("velocity", 0.0) * rng.standard_normal(vel.shape)
        return Run(np.einsum("kabp,kb->kap", yd, vel), tau, yd, np.zeros(yd.shape[:3]), vel, signal,
                   rate_hz, (alpha,))


# ------------------------------------------------------------------------------ methods
METHODS = ("dual_metric", "wls", "energy", "wls_logdet", "wls_pullback")
#: not the seed's: the dual metric with the regularised baselines' pull-back prior (what the
#: prior alone is worth)
DIAGNOSTIC = ("dual_metric_pullback",)


def weighted_rows(target: Target, run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(K·n, p)`` and right-hand side weighted by 1/σ_j, σ_j² the coordinate's residual
    variance at the unconstrained least-squares fit on base parameters (seed §IV, eqs. 5–6)."""
    k, n, _ = run.y.shape
    rank = target.base.rank
    yb = target.base.columns(run.y)
    beta = rla.lstsq(yb.reshape(-1, rank), run.tau.reshape(-1))
    resid = run.tau - yb @ beta
    var = (resid**2).sum(axis=0) / max(k - rank / n, 1.0)
    var = np.maximum(var, 1e-12 * max(float(var.max()), 1e-300))
    sw = 1.0 / np.sqrt(var)
    return (run.y * sw[None, :, None]).reshape(k * n, -1), (run.tau * sw).reshape(-1)


def fit(method: str, target: Target, run: Run, prior_weight: float) -> np.ndarray:
    """θ̂ of one of :data:`METHODS` (or :data:`DIAGNOSTIC`), every method within the same
    consistency constraints."""
    # the paper's program as written (eq. 33: the metric minimised over too), which this reproduces;
    # ``sysid identify --method dual_metric`` takes the metric at the estimate (core.batch.dual_metric)
    if method == "dual_metric":
        return dual_metric_program(target, run.y, run.tau, run.ym, run.m_known, metric="joint").theta
    if method == "dual_metric_pullback":
        return dual_metric_program(target, run.y, run.tau, run.ym, run.m_known, regularizer="pullback",
                                   weight=prior_weight, metric="joint").theta
    if method == "energy":  # Σ_k (q̇_kᵀ (Y_k θ − τ_k))² (eq. 9)
        return least_squares_program(target, np.einsum("kj,kjp->kp", run.rate, run.y),
                                     np.einsum("kj,kj->k", run.rate, run.tau)).theta
    w, rhs = weighted_rows(target, run)
    if method == "wls":
        return least_squares_program(target, w, rhs).theta
    kind = {"wls_logdet": "logdet", "wls_pullback": "pullback"}[method]
    return least_squares_program(target, w, rhs, regularizer=kind, weight=prior_weight).theta


def score(system, theta: np.ndarray, run: Run) -> np.ndarray:
    """Per coordinate, the seed's NCC of predicted and measured forward dynamics: the largest
    over shifts within ±5° of the slowest motion's period."""
    shift = round(system.slowest_period * 5 / 360 * run.rate_hz)
    return shifted_ncc(system.predict(theta, run), run.signal, shift)


#: the carriage + pan-tilt of the first dual-metric benchmark: a carriage on a rail carrying a
#: pan-tilt head with a mass on a boom (mixed units, a configuration-dependent metric)
CARRIAGE_MJCF = """
<mujoco model="carriage_pan_tilt">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <worldbody>
    <body name="carriage">
      <joint name="rail" type="slide" axis="1 0 0" range="-0.4 0.4"/>
      <inertial pos="0 0 0.02" mass="3.0" diaginertia="0.02 0.03 0.04"/>
      <body name="pan_link" pos="0 0 0.1">
        <joint name="pan" axis="0 0 1" range="-2.5 2.5"/>
        <inertial pos="0 0 0.02" mass="0.3" diaginertia="0.0006 0.0006 0.0004"/>
        <body name="boom" pos="0 0 0.05">
          <joint name="tilt" axis="0 1 0" range="-1.2 1.2"/>
          <inertial pos="0.45 0 0" mass="0.8" diaginertia="0.0004 0.0005 0.0005"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
