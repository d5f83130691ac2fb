"""Fits of one recording with several sets of joint terms (the nonlinear-friction tests compare a
model with the term against models without it)."""

from __future__ import annotations

from collections.abc import Iterable

from sysid_ros.core import RobotModel
from sysid_ros.core.batch.identify import IdentifyOptions, Prepared, prepare, run_method
from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.result import IdentificationResult


def fits_by_terms(arm_xml: str, recording: Dataset, term_sets: Iterable[tuple[str, tuple[str, ...]]],
                  method: str = "ols") -> dict[str, tuple[Prepared, IdentificationResult]]:
    """``{label: (prepared data, result)}``: ``recording`` identified by ``method`` with the arm of
    ``arm_xml`` given each ``(label, joint terms)``, default preprocessing (nonlinear friction
    shapes searched)."""
    out = {}
    for label, terms in term_sets:
        prep = prepare(recording, arm_target(RobotModel.from_xml_string(arm_xml, joint_terms=terms)),
                       Preprocessing())
        out[label] = (prep, run_method(prep, IdentifyOptions(method=method)))
    return out
