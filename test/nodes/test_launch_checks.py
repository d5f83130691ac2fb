"""The checks the launch files make before any node starts (sysid_ros/nodes/launch_checks.py):
exactly launch's IfCondition values for switches, an existing bag refused, a missing model refused,
each in one line naming the argument. No launch tooling needed."""

from __future__ import annotations

import pytest

from sysid_ros.core.errors import SysIdError
from sysid_ros.nodes.launch_checks import RUN_ARGUMENTS, model_file, new_bag, run_arguments, switch

# launch/conditions/evaluate_condition_expression_impl.py (launch 3.x): the expanded text, stripped
# and lower-cased, must be 'true' or '1' (true), 'false' or '0' (false); anything else is an error
IF_CONDITION = {"true": True, "1": True, "false": False, "0": False}


@pytest.mark.parametrize("text", ["true", "True", "TRUE", " 1 ", "1", "false", "False", "0", " FALSE"])
def test_a_switch_takes_what_if_condition_takes(text):
    assert switch("record", text) is IF_CONDITION[text.strip().lower()]


@pytest.mark.parametrize("text", ["yes", "no", "on", "", "2", "true!", "t"])
def test_any_other_switch_value_is_refused_naming_the_argument(text):
    with pytest.raises(SysIdError) as err:
        switch("record", text)
    assert str(err.value) == (f"launch argument record:={text!r}: expected true, false, 1 or 0 "
                              "(case-insensitive, as launch's IfCondition accepts)")


def test_an_existing_bag_is_refused_and_a_new_one_taken(tmp_path):
    (tmp_path / "run1").mkdir()
    with pytest.raises(SysIdError) as err:
        new_bag("bag", "run1", cwd=tmp_path)
    assert str(err.value) == (f"launch argument bag:=run1: {tmp_path / 'run1'} already exists; a run never "
                              "overwrites a recording: name a new bag, or give bag:='' for a fresh "
                              "sysid_bags/run_<date-time>")
    assert new_bag("bag", "run2", cwd=tmp_path) == tmp_path / "run2"
    assert new_bag("bag", "") is None  # the recorder names a fresh one
    assert not (tmp_path / "run2").exists()  # the check creates nothing


def test_a_model_that_is_no_file_is_refused(tmp_path):
    with pytest.raises(SysIdError) as err:
        model_file("model", "/nonexistent.xml")
    assert str(err.value) == ("launch argument model:=/nonexistent.xml: no such file (expected an MJCF or "
                              "URDF file, or '' for the package's robot)")
    with pytest.raises(SysIdError):
        model_file("model", str(tmp_path))  # a folder is no model
    (tmp_path / "arm.xml").write_text("<mujoco/>")
    assert model_file("model", str(tmp_path / "arm.xml")) == tmp_path / "arm.xml"
    assert model_file("model", "") is None


def test_shared_launch_arguments_keep_one_description_and_take_a_launch_files_default():
    picked = run_arguments("target", "lockstep", "bag", target="link_6")
    assert [name for name, _, _ in picked] == ["target", "lockstep", "bag"]
    assert picked[0] == ("target", "link_6", RUN_ARGUMENTS["target"][1])  # default given here
    assert picked[1] == ("lockstep", "false", RUN_ARGUMENTS["lockstep"][1])  # the table's default
    with pytest.raises(KeyError):
        run_arguments("no_such_argument")
