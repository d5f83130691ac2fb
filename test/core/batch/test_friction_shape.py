"""Issue 22 item 6: the sigmoid friction shape search covers the steepness of published arms with
room to spare (φ2 in 1–1000 s/rad; Gaz et al. 2019 found 5–17 s/rad on the Panda) and never stops
at a bound silently: result.json's search says which bound binds, and so does the summary.

The 3-joint sigmoid test arm (test/oracles/sigmoid_arm.py, Gaz et al.'s Panda joints 1-3) with
joint j1's transition made 5000 s/rad steep (0.2 mrad/s wide: Coulomb friction as far as any
recording can tell), noise-free: j1's search ends at the upper bound 1000 s/rad and says so; j2
and j3 (9 and 10 s/rad) are found inside the interval, within 3 %."""

from __future__ import annotations

import pytest
from oracles.sigmoid_arm import PHI_TRUE, SIGMOID_ARM
from support.friction_fits import fits_by_terms

from sysid_ros.core import RobotModel
from sysid_ros.core.batch.friction_shape import SIGMOID_STEEPNESS_SEARCH
from sysid_ros.core.report.files import summary
from sysid_ros.core.sim.synthetic import simulate_dataset

STEEP = SIGMOID_ARM.replace(f'data="{" ".join(map(str, PHI_TRUE["j1"]))}"', 'data="0.54615 5000 0"')


@pytest.mark.slow
def test_a_bound_that_binds_is_in_result_and_summary():
    assert SIGMOID_STEEPNESS_SEARCH == (1.0, 1000.0)
    assert 'data="0.54615 5000 0"' in STEEP
    recording = simulate_dataset(RobotModel.from_xml_string(STEEP), duration=12.0, seed=1)
    _, result = fits_by_terms(STEEP, recording, (("sigmoid", ("Fv", "Ia", "Fsig")),))["sigmoid"]
    joints = result.diagnostics.extra["sigmoid"]["search"]["joints"]
    assert joints["j1"]["bound"] == "phi2 = 1000 s/rad at the upper end of 1..1000 s/rad"
    assert joints["j1"]["at_search_edge"]
    for joint in ("j2", "j3"):
        assert joints[joint]["bound"] is None
        assert joints[joint]["phi2"] == pytest.approx(PHI_TRUE[joint][1], rel=0.03)
    text = summary(result)
    assert ("sigmoid shape search stopped at a bound: j1: phi2 = 1000 s/rad at the upper end of "
            "1..1000 s/rad") in text.splitlines()
