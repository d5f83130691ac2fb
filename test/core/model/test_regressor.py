"""Regressors against MuJoCo's own dynamics (mj_inverse, mj_fullM), the correctness bar:
relative error below 1e-9 on every test robot, with joint terms zero and non-zero."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT, TEST_ROBOTS, robot_params

from sysid_ros.core import (
    DataError,
    RobotModel,
    body_regressor,
    gravity_regressor,
    mass_matrix_regressor,
    momentum_regressors,
    random_states,
    torque_regressor,
)
from sysid_ros.core.model.robot import body_params_from_inertial

RTOL = 1e-9
LINEAR_STATES = (int(mujoco.mjtConstraintState.mjCNSTRSTATE_LINEARNEG),
                 int(mujoco.mjtConstraintState.mjCNSTRSTATE_LINEARPOS))


def _with_joint_props(mj: mujoco.MjModel, kind: str, rng) -> mujoco.MjModel:
    mj = copy.deepcopy(mj)
    if kind == "zero":
        mj.dof_armature[:] = mj.dof_damping[:] = mj.dof_frictionloss[:] = 0.0
    elif kind == "random":
        mj.dof_armature[:] = rng.uniform(0.01, 0.2, mj.nv)
        mj.dof_damping[:] = rng.uniform(0.1, 2.0, mj.nv)
        mj.dof_frictionloss[:] = rng.uniform(0.05, 0.5, mj.nv)
    return mj


def _states(model: RobotModel, n: int, seed: int):
    """Random states inside the limits (5 % margin), every joint moving at 0.5..2 rad/s so that
    MuJoCo's friction loss is saturated (= Fc·sign(q̇), the model's Coulomb term)."""
    q, _, ddq = random_states(model, n, seed=seed)
    for j in model.joints:
        if j.range is not None:
            lo, hi = j.range
            q[:, j.qpos_adr] = np.clip(q[:, j.qpos_adr], lo + 0.05 * (hi - lo), hi - 0.05 * (hi - lo))
    rng = np.random.default_rng(seed + 1)
    dq = rng.uniform(0.5, 2.0, (n, model.nv)) * rng.choice([-1.0, 1.0], (n, model.nv))
    return q, dq, ddq


def _mj_inverse(mj, q, dq, ddq):
    data = mujoco.MjData(mj)
    out = np.empty((len(q), mj.nv))
    for i in range(len(q)):
        data.qpos[:], data.qvel[:], data.qacc[:] = q[i], dq[i], ddq[i]
        mujoco.mj_inverse(mj, data)
        friction = data.efc_type[:data.nefc] == int(mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF)
        assert data.nefc == friction.sum(), "only friction-loss constraints may be active"
        assert np.isin(data.efc_state[:data.nefc], LINEAR_STATES).all(), "friction not saturated"
        out[i] = data.qfrc_inverse
    return out


def _full_m(mj, q):
    data = mujoco.MjData(mj)
    out = np.empty((len(q), mj.nv, mj.nv))
    for i in range(len(q)):
        data.qpos[:] = q[i]
        mujoco.mj_forward(mj, data)
        mujoco.mj_fullM(mj, data, out[i])
    return out


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("props", ["nominal", "zero", "random"])
@pytest.mark.parametrize("path", robot_params())
def test_torque_regressor_matches_mj_inverse(path, props):
    base = RobotModel.from_mjcf(path)
    model = RobotModel(_with_joint_props(base.mj, props, np.random.default_rng(7)), source=str(path))
    q, dq, ddq = _states(model, 40, seed=11)
    ref = _mj_inverse(model.mj, q, dq, ddq)
    assert _rel(torque_regressor(model, q, dq, ddq) @ model.nominal, ref) < RTOL  # batched path
    for i in range(3):  # one sample per call
        assert _rel(torque_regressor(model, q[i], dq[i], ddq[i]) @ model.nominal, ref[i]) < RTOL


@pytest.mark.parametrize("path", robot_params())
def test_mass_matrix_and_momentum_regressors(path):
    model = RobotModel.from_mjcf(path)
    q, dq, _ = _states(model, 12, seed=5)
    m_ref = _full_m(model.mj, q)
    m = mass_matrix_regressor(model, q) @ model.nominal
    assert _rel(m, m_ref) < RTOL
    assert _rel(mass_matrix_regressor(model, q[0]) @ model.nominal, m_ref[0]) < RTOL
    mom = momentum_regressors(model, q, dq)
    assert _rel(mom.Yp @ model.nominal, np.einsum("nij,nj->ni", m_ref, dq)) < RTOL
    # gravity: inverse dynamics at rest without friction
    mj = _with_joint_props(model.mj, "zero", None)
    g_ref = _mj_inverse(mj, q, np.zeros_like(dq), np.zeros_like(dq))
    assert _rel(gravity_regressor(model, q) @ model.nominal, g_ref) < RTOL
    assert _rel(mom.Yg @ model.nominal, g_ref) < RTOL


@pytest.mark.parametrize("path", robot_params())
def test_coriolis_transpose_term_is_gradient_of_kinetic_energy(path):
    """Cᵀ(q, q̇) q̇ = ∂K/∂q with K = ½ q̇ᵀ M(q) q̇, by central differences of mj_fullM."""
    model = RobotModel.from_mjcf(path)
    q, dq, _ = _states(model, 4, seed=9)
    yc = momentum_regressors(model, q, dq).Yc @ model.nominal
    h = 1e-6
    for i in range(len(q)):
        grad = np.empty(model.nv)
        for k in range(model.nv):
            qp, qm = q[i].copy(), q[i].copy()
            qp[k] += h
            qm[k] -= h
            mp, mm = _full_m(model.mj, np.stack((qp, qm)))
            grad[k] = 0.5 * dq[i] @ (mp - mm) @ dq[i] / (2 * h)
        np.testing.assert_allclose(yc[i], grad, atol=1e-7 * np.abs(grad).max() + 1e-9)


def test_momentum_equation_along_a_trajectory():
    """τ = d/dt(Yp θ) − Yc θ + Yg θ + Yf θ on a smooth trajectory (time derivative by the
    exact chain rule through M(q(t)) q̇(t), checked against 4th-order central differences)."""
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    t = np.linspace(0.0, 2.0, 2001)
    w = np.arange(1, model.nv + 1) * 0.7
    q = 1.0 + 0.5 * np.sin(np.outer(t, w))
    dq = 0.5 * w * np.cos(np.outer(t, w))
    ddq = -0.5 * w**2 * np.sin(np.outer(t, w))
    mom = momentum_regressors(model, q, dq)
    p = mom.Yp @ model.nominal
    dt = t[1] - t[0]
    dp = (-p[4:] + 8 * p[3:-1] - 8 * p[1:-3] + p[:-4]) / (12 * dt)
    tau = torque_regressor(model, q, dq, ddq) @ model.nominal
    rhs = tau + (mom.Yc - mom.Yg - mom.Yf) @ model.nominal
    np.testing.assert_allclose(dp, rhs[2:-2], atol=1e-7 * np.abs(rhs).max())


def test_body_regressor_plus_remainder_is_the_full_torque():
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    q, dq, ddq = _states(model, 20, seed=3)
    full = torque_regressor(model, q, dq, ddq) @ model.nominal
    for body in ("link7", "hand", "link3"):
        y_b, rest = body_regressor(model, body, q, dq, ddq)
        assert y_b.shape == (20, model.nv, 10)
        assert _rel(y_b @ model.nominal[model.body_slice(body)] + rest, full) < RTOL
    y1, r1 = body_regressor(model, "hand", q[0], dq[0], ddq[0])
    assert y1.shape == (model.nv, 10) and r1.shape == (model.nv,)


def test_payload_regressor_reproduces_a_model_with_the_payload_attached():
    """A 2 kg box attached to the YAM's last link: its 10 parameters in that link's frame, times
    the link's body regressor, plus the bare arm's torque, equal MuJoCo's inverse dynamics."""
    spec = mujoco.MjSpec.from_file(str(DEFAULT_ROBOT))
    pos, quat = np.array([0.01, -0.02, 0.09]), np.array([0.9, 0.1, -0.3, 0.2])
    payload = spec.body("link_6").add_body(name="payload", pos=pos, quat=quat)
    payload.mass, payload.ipos, payload.inertia = 2.0, [0.005, 0.0, 0.01], [0.004, 0.003, 0.002]
    payload.explicitinertial = True
    with_payload = RobotModel(spec.compile(), joint_terms=())
    arm = RobotModel.from_mjcf(DEFAULT_ROBOT, joint_terms=())
    q, dq, ddq = _states(arm, 15, seed=21)
    ref = _mj_inverse(_with_joint_props(with_payload.mj, "zero", None), q, dq, ddq)
    # payload inertial expressed in link_6's frame about its origin
    from sysid_ros.core.model.spatial import quat_to_mat

    rot = quat_to_mat(quat)
    b = with_payload.body_id("payload")
    r_i = quat_to_mat(with_payload.mj.body_iquat[b])
    i_com = rot @ r_i @ np.diag(with_payload.mj.body_inertia[b]) @ r_i.T @ rot.T
    phi = body_params_from_inertial(2.0, pos + rot @ with_payload.mj.body_ipos[b], i_com)
    arm_mj = _with_joint_props(arm.mj, "zero", None)
    arm0 = RobotModel(arm_mj, joint_terms=())
    y_b, rest = body_regressor(arm0, "link_6", q, dq, ddq)
    own = torque_regressor(arm0, q, dq, ddq) @ arm0.nominal
    assert _rel(rest, own - y_b @ arm0.nominal[arm0.body_slice("link_6")]) < RTOL
    assert _rel(y_b @ phi + own, ref) < RTOL


@pytest.mark.parametrize("gravity", [0.0, -9.81])
def test_free_floating_base(gravity):
    """A Panda on a free joint (the orbital case at zero gravity) against MuJoCo."""
    spec = mujoco.MjSpec.from_file(str(TEST_ROBOTS / "panda.xml"))
    spec.option.gravity = [0.0, 0.0, gravity]
    spec.body("link0").add_freejoint()
    model = RobotModel(spec.compile())
    assert (model.nq, model.nv) == (14, 13)
    assert "link0.m" in model.param_names
    q, dq, ddq = _states(model, 10, seed=4)
    ref = _mj_inverse(model.mj, q, dq, ddq)
    assert _rel(torque_regressor(model, q, dq, ddq) @ model.nominal, ref) < RTOL
    assert _rel(torque_regressor(model, q[0], dq[0], ddq[0]) @ model.nominal, ref[0]) < RTOL
    assert _rel(mass_matrix_regressor(model, q) @ model.nominal, _full_m(model.mj, q)) < RTOL


INLINE = """
<mujoco>
  <option gravity="0.3 -1 -9.81"/>
  <worldbody>
    <body name="cart" pos="0.1 0 0.2" quat="0.9 0.1 0.2 0.3">
      <joint name="rail" type="slide" axis="1 0.2 0" ref="0.05" damping="0.3" armature="0.02"/>
      <inertial pos="0.02 0.01 -0.03" mass="2" fullinertia="0.03 0.02 0.025 0.001 -0.002 0.003"/>
      <body name="pan_tilt" pos="0 0.1 0.3">
        <joint name="pan" axis="0 0 1" pos="0.01 0 0" ref="0.3"/>
        <joint name="tilt" axis="0 1 0.2" pos="0 0.02 0.05"/>
        <inertial pos="0.1 0.02 0.01" mass="0.7" diaginertia="0.004 0.003 0.002" quat="1 0.2 0 0.1"/>
        <body name="wrist" pos="0.3 0 0">
          <joint name="ball" type="ball" pos="0.01 0.01 0"/>
          <inertial pos="0.05 0 0.02" mass="0.4" diaginertia="0.001 0.0012 0.0008"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_slide_multi_joint_ball_and_reference_positions():
    model = RobotModel.from_xml_string(INLINE)
    assert [j.type for j in model.joints] == ["slide", "hinge", "hinge", "ball"]
    q, dq, ddq = _states(model, 12, seed=8)
    ref = _mj_inverse(model.mj, q, dq, ddq)
    assert _rel(torque_regressor(model, q, dq, ddq) @ model.nominal, ref) < RTOL
    assert _rel(torque_regressor(model, q[1], dq[1], ddq[1]) @ model.nominal, ref[1]) < RTOL
    assert _rel(mass_matrix_regressor(model, q) @ model.nominal, _full_m(model.mj, q)) < RTOL
    mom = momentum_regressors(model, q, dq)
    m_ref = _full_m(model.mj, q)
    assert _rel(mom.Yp @ model.nominal, np.einsum("nij,nj->ni", m_ref, dq)) < RTOL


def test_bad_shapes_are_reported():
    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    with pytest.raises(DataError, match=r"expected q of shape \(N, 6\)"):
        torque_regressor(model, np.zeros((3, 5)), np.zeros((3, 6)), np.zeros((3, 6)))
    with pytest.raises(DataError, match=r"expected ddq of shape \(3, 6\)"):
        torque_regressor(model, np.zeros((3, 6)), np.zeros((3, 6)), np.zeros((2, 6)))
    with pytest.raises(DataError, match="not a moving body"):
        body_regressor(model, "base", np.zeros(6), np.zeros(6), np.zeros(6))


def test_inputs_of_any_layout_give_the_same_regressor():
    """Lists, Fortran order, strided views and read-only arrays give the C-array result; the
    result is C-contiguous and owns its memory (the compiled kernel gets copies)."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "panda.xml")
    q, dq, ddq = _states(model, 8, seed=13)
    ref = torque_regressor(model, q, dq, ddq)
    wide = np.repeat(q, 2, axis=0)[::2]  # strided view
    frozen = ddq.copy()
    frozen.setflags(write=False)
    y = torque_regressor(model, wide, dq.tolist(), np.asfortranarray(frozen))
    np.testing.assert_array_equal(y, ref)
    assert y.flags.c_contiguous and y.flags.owndata
    np.testing.assert_array_equal(torque_regressor(model, list(q[2]), tuple(dq[2]), frozen[2]), ref[2])
    np.testing.assert_array_equal(mass_matrix_regressor(model, np.asfortranarray(q)),
                                  mass_matrix_regressor(model, q))


def test_regressor_from_concurrent_threads():
    """The kernels release the GIL and keep their scratch per call: two threads computing
    different batches at once get exactly the results of one thread."""
    from concurrent.futures import ThreadPoolExecutor

    model = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml")
    batches = [_states(model, 300, seed=s) for s in (1, 2, 3, 4)]
    serial = [torque_regressor(model, *b) for b in batches]
    with ThreadPoolExecutor(max_workers=2) as pool:
        parallel = list(pool.map(lambda b: torque_regressor(model, *b), batches))
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)
