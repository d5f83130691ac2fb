"""result.json has one owner (core/result_file.py): what write_outputs writes is what ResultFile
loads, with a schema version; older files (version 1 without the field, the estimator's former
~/save format) load migrated; every reader of the package reads through it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sysid_ros.core import RobotModel
from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method
from sysid_ros.core.data.preprocessing import Preprocessing
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.target import arm_target
from sysid_ros.core.monitor.session import parameters_from_result
from sysid_ros.core.report.files import write_outputs
from sysid_ros.core.report.metrics import evaluate
from sysid_ros.core.report.report_data import read_result
from sysid_ros.core.result_file import SCHEMA_VERSION, ResultFile
from sysid_ros.core.sim.synthetic import simulate_dataset

# a planar two-link arm (values of the order of a small hobby arm; not a published robot)
ARM = """
<mujoco model="arm_2r">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 0.1">
      <joint name="shoulder" axis="0 1 0" range="-2 2" damping="0.1"/>
      <inertial pos="0.15 0 0" mass="1.2" diaginertia="0.002 0.01 0.011"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="elbow" axis="0 1 0" range="-2 2" damping="0.05"/>
        <inertial pos="0.12 0.01 0" mass="0.7" diaginertia="0.001 0.004 0.0045"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An OLS result written by write_outputs (the batch writer): its folder, result and document."""
    model = RobotModel.from_xml_string(ARM, joint_terms=("Fv",))
    prep = prepare(simulate_dataset(model, duration=4.0, seed=0), arm_target(model), Preprocessing())
    result = run_method(prep, IdentifyOptions(method="ols"))
    out = tmp_path_factory.mktemp("out")
    paths, doc = write_outputs(out, result, prep.target, evaluate(result, prep), plots=False,
                               report=False, extra={"not_a_number": float("nan")})
    return out, result, doc, paths


def test_the_batch_writer_writes_version_2_in_strict_json_and_load_reads_it_back(written):
    out, result, doc, paths = written
    path = out / "result.json"
    assert path.resolve() in paths
    text = path.read_text()
    assert text == ResultFile.dumps(doc) + "\n"
    assert "NaN" not in text and "Infinity" not in text
    on_disk = json.loads(text)
    assert list(on_disk)[:2] == ["schema_version", "method"]
    assert on_disk["schema_version"] == SCHEMA_VERSION == 2
    assert on_disk["not_a_number"] is None  # the one number rule
    assert ResultFile.load(path) == on_disk == doc
    assert ResultFile.load(out) == doc  # a folder holding one
    values = ResultFile.exported_values(path)
    assert list(values) == list(result.parameters.names)
    np.testing.assert_array_equal(list(values.values()), result.parameters.values)


def test_a_version_1_file_loads_as_the_current_schema_and_every_reader_takes_it(written, tmp_path):
    _, result, doc, _ = written
    old = {k: v for k, v in doc.items() if k != "schema_version"}  # the files before the field
    path = tmp_path / "result.json"
    path.write_text(json.dumps(old, indent=2))
    assert ResultFile.load(path) == doc
    assert read_result(path) == doc  # the report
    model = RobotModel.from_xml_string(ARM, joint_terms=("Fv",))
    np.testing.assert_array_equal(parameters_from_result(model, path), result.parameters.values)


def test_the_estimators_former_save_format_is_migrated(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"method": "rls_logdet", "target": "link_6", "samples": 400,
                                "exported_parameters": {"values": {"payload.m": 1.5, "payload.hx": 0.1}},
                                "std_dev": {"payload.m": 0.01, "payload.hx": 0.002},
                                "physically_consistent": True, "divergence_to_prior": 0.3}))
    doc = ResultFile.load(path)
    assert doc["schema_version"] == 2
    assert doc["parameters"] == {"payload.m": {"value": 1.5, "std": 0.01},
                                 "payload.hx": {"value": 0.1, "std": 0.002}}
    assert doc["exported_parameters"] == {"from": "rls_logdet",
                                          "values": {"payload.m": 1.5, "payload.hx": 0.1}}
    assert doc["target"] == {"kind": "payload", "body": "link_6"}
    assert doc["samples"] == 400
    assert ResultFile.exported_values(path) == {"payload.m": 1.5, "payload.hx": 0.1}


def test_bad_files_are_refused_with_one_line(written, tmp_path):
    _, _, doc, _ = written
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**doc, "schema_version": 3}))
    with pytest.raises(SysIdError, match=r"newer.json: result schema version 3 is newer than this "
                       r"sysid_ros reads \(2\); update sysid_ros"):
        ResultFile.load(newer)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(SysIdError, match=r"garbage.json: expected a result.json of sysid identify, "
                       r"got JSONDecodeError"):
        ResultFile.load(garbage)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(SysIdError, match=r"expected a result.json of sysid identify \(a JSON object\), "
                       r"got list"):
        ResultFile.load(listed)
    with pytest.raises(SysIdError, match="expected a result.json with exported_parameters.values, got "
                       f"{tmp_path / 'missing.json'}"):
        ResultFile.exported_values(tmp_path / "missing.json")
    # a writer's own format is refused (no second format next to the owner's), and nothing is written
    with pytest.raises(SysIdError, match="expected a result document of schema version 2"):
        ResultFile.write(tmp_path / "own.json", {"method": "ols", "values": [math.pi]})
    assert not (tmp_path / "own.json").exists()
