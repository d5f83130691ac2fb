"""Which rows the least-squares methods regress when a Coulomb term is identified
(``core.batch.least_squares.coulomb_rows``)."""

from __future__ import annotations

import numpy as np
from support.robots import TEST_ROBOTS

from sysid_ros.core.batch.least_squares import SLIDE_SPEED_SHARE, coulomb_rows
from sysid_ros.core.model.robot import RobotModel, joint_terms


def test_a_slide_joint_keeps_its_rows_above_a_share_of_its_own_top_speed():
    """scara4's quill (j3, a slide joint in m/s) peaks at 0.06 m/s: with the hinge joints' 0.05
    rad/s it kept only its fastest rows, all one way (issue 22's repeatability failure); its
    threshold is SLIDE_SPEED_SHARE of its top speed, the hinges' stays min_speed, and without a
    Coulomb term every row is kept."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "scara4.xml", joint_terms=joint_terms("coulomb", False))
    t = np.linspace(0.0, 10.0, 1001)
    dq = np.column_stack([0.5 * np.sin(t), 0.5 * np.cos(t), 0.06 * np.sin(2 * t), 0.04 * np.sin(t)])
    rows = coulomb_rows(model, dq, 0.05)
    np.testing.assert_array_equal(rows[:, [0, 1, 3]], np.abs(dq[:, [0, 1, 3]]) >= 0.05)
    np.testing.assert_array_equal(rows[:, 2], np.abs(dq[:, 2]) >= SLIDE_SPEED_SHARE * np.abs(dq[:, 2]).max())
    assert rows[:, 3].sum() == 0  # a hinge joint slower than min_speed keeps none
    quill = dq[rows[:, 2], 2]
    assert (quill > 0).sum() > 400 and (quill < 0).sum() > 400  # both directions
    without = RobotModel.from_mjcf(TEST_ROBOTS / "scara4.xml", joint_terms=joint_terms("viscous", False))
    assert coulomb_rows(without, dq, 0.05).all()


def test_a_payload_target_leaves_out_the_rows_of_joints_at_rest():
    """A payload target subtracts the arm's known Coulomb friction Fc·sign(q̇) from the torque;
    for a joint at rest that sign is noise (Damiao feedback reads ±half a velocity count, 0.007
    rad/s, at standstill) while the motor holds against static friction: those rows are left out
    as an arm target's are (kept, a resting wrist put the payload CoM z 7 mm off, issue 24)."""
    from support.robots import DEFAULT_ROBOT

    from sysid_ros.core.batch.identify import prepare
    from sysid_ros.core.data.dataset import Dataset
    from sysid_ros.core.data.preprocessing import Preprocessing
    from sysid_ros.core.model.target import payload_target

    model = RobotModel.from_mjcf(DEFAULT_ROBOT)
    t = np.arange(0.0, 10.0, 0.002)
    w = 2 * np.pi * 0.2
    q = np.column_stack([0.5 * np.sin(w * t), 1.0 + 0.4 * np.sin(w * t), 1.0 + 0.4 * np.cos(w * t),
                         0.5 * np.sin(w * t), np.zeros_like(t), 0.5 * np.cos(w * t)])
    dq = np.gradient(q, t, axis=0)
    dq[:, 4] = np.where(np.arange(len(t)) % 2, 0.0073, -0.0073)  # joint5 at rest, quantised
    ds = Dataset(t, model.dof_joint_names, q, dq, np.zeros_like(q))
    prep = prepare(ds, payload_target(model, "link_6"), Preprocessing(), min_speed=0.05)
    assert not prep.mask[:, 4].any()  # the resting joint: no row
    np.testing.assert_array_equal(prep.mask[:, 0], np.abs(prep.dq[:, 0]) >= 0.05)
