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
