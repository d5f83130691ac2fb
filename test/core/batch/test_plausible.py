"""The plausible export's conic fall-back (``core.batch.plausible``): when no form of its program
solves, one error names every form tried."""

from __future__ import annotations

import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.core.batch import plausible
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import batch_target


def test_an_infeasible_export_names_every_form_it_tried():
    """Base parameters ten times the model file's within a 1e-6 radius, with masses bounded by 2x
    the file's: no θ satisfies both, in either form of the fit constraint."""
    model = RobotModel.from_mjcf(TEST_ROBOTS / "ur5e.xml", joint_terms=())
    target = batch_target(model)
    a_mat = target.base.matrix
    b_vec = 10.0 * target.base.of(target.prior)
    with pytest.raises(IdentificationError) as info:
        plausible._conic_export(target, a_mat, b_vec, 1e-6, target.prior)
    message = str(info.value)
    assert message.startswith("the plausible fit's conic program failed in every form tried (")
    assert all(f"{form} form: " in message for form in plausible.CONIC_FORMS), message
    assert "\n" not in message
