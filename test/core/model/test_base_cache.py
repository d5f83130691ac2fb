"""Base-parameter reductions on disk (core/model/base_cache.py): the same values as computed, a key
that changes with everything the reduction depends on, bad entries and folders survived."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sysid_ros.core import RobotModel, base_parameters
from sysid_ros.core.model.base_cache import cache_dir, structure_key
from sysid_ros.core.model.base_params import BaseParameters, reduce_regressor
from sysid_ros.core.model.target import payload_target

ROOT = Path(__file__).resolve().parents[3]

ARM = """
<mujoco><worldbody>
  <body name="l1"><joint name="j1" axis="0 0 1" range="-2 2"/>
    <inertial pos="0.1 0.01 0" mass="2" diaginertia="0.01 0.02 0.03"/>
    <body name="l2" pos="0 0 0.4"><joint name="j2" axis="0 1 0"/>
      <inertial pos="0.2 -0.02 0.01" mass="1" diaginertia="0.005 0.006 0.007"/>
      <body name="l3" pos="0.3 0 0"><joint name="j3" axis="0 1 0"/>
        <inertial pos="0.1 0 0" mass="0.5" diaginertia="0.002 0.003 0.004"/>
      </body>
    </body>
  </body>
</worldbody></mujoco>"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SYSID_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "base_params").glob("*.npz"))


def computed(model: RobotModel) -> BaseParameters:
    """The reduction computed here, without the cache (the reference)."""
    from sysid_ros.core import random_states, torque_regressor

    n = max(200, 4 * model.n_params // max(1, model.nv) + 50)
    q, dq, ddq = random_states(model, n, seed=0)
    return reduce_regressor(torque_regressor(model, q, dq, ddq), model.param_names)


def same(a: BaseParameters, b: BaseParameters) -> None:
    assert a.param_names == b.param_names and a.names == b.names
    for field in ("independent", "dependent", "regrouping", "matrix"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.condition_number == b.condition_number


def test_a_stored_reduction_reads_back_bit_for_bit(private_cache):
    model = RobotModel.from_xml_string(ARM)
    first = base_parameters(model)
    assert len(entries(private_cache)) == 1
    again = base_parameters(RobotModel.from_xml_string(ARM))
    same(first, again)
    same(again, computed(model))
    assert again.independent.dtype == np.int64 and again.rank == first.rank


def test_a_process_reading_a_stored_reduction_does_not_set_up_the_compiled_regressor(private_cache):
    """What the cache is for: a node's start reads the reduction without numba (its import and
    CPU target cost ~1-2 s of CPU)."""
    base_parameters(RobotModel.from_xml_string(ARM))  # stored
    code = ("import sys; from sysid_ros.core.model.robot import RobotModel; "
            "from sysid_ros.core.model.base_params import base_parameters; "
            f"b = base_parameters(RobotModel.from_xml_string({ARM!r})); "
            "print(b.rank, 'numba' in sys.modules)")
    env = dict(os.environ, SYSID_CACHE_DIR=str(private_cache))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT, check=True).stdout.split()
    assert out == [str(computed(RobotModel.from_xml_string(ARM)).rank), "False"]


def test_the_key_changes_with_what_the_reduction_depends_on():
    model = RobotModel.from_xml_string(ARM)
    key = structure_key(model, ("torque", 200, 0, 1e-8))
    assert structure_key(RobotModel.from_xml_string(ARM), ("torque", 200, 0, 1e-8)) == key
    # the inertial values do not enter the regressor: same key
    heavier = ARM.replace('mass="2"', 'mass="7"')
    assert structure_key(RobotModel.from_xml_string(heavier), ("torque", 200, 0, 1e-8)) == key
    others = [
        structure_key(model, ("torque", 200, 1, 1e-8)),  # seed
        structure_key(model, ("torque", 201, 0, 1e-8)),  # sample count
        structure_key(model.with_joint_terms(("Fv",)), ("torque", 200, 0, 1e-8)),
        structure_key(model.with_stribeck_velocity(0.3), ("torque", 200, 0, 1e-8)),
        structure_key(RobotModel.from_xml_string(ARM.replace('pos="0.3 0 0"', 'pos="0.31 0 0"')),
                      ("torque", 200, 0, 1e-8)),  # kinematics
        structure_key(RobotModel.from_xml_string(ARM.replace('range="-2 2"', 'range="-1 2"')),
                      ("torque", 200, 0, 1e-8)),  # random states' range
        structure_key(RobotModel.from_xml_string(ARM.replace("<mujoco>", '<mujoco><option gravity="0 0 -9"/>')
                                                 ), ("torque", 200, 0, 1e-8)),  # gravity
    ]
    assert len({key, *others}) == 1 + len(others)


def test_a_different_structure_is_computed_not_read(private_cache):
    model = RobotModel.from_xml_string(ARM)
    full = base_parameters(model)
    viscous = base_parameters(model.with_joint_terms(("Fv",)))
    assert len(entries(private_cache)) == 2
    assert viscous.param_names != full.param_names
    same(viscous, computed(model.with_joint_terms(("Fv",))))


@pytest.mark.parametrize("damage", [b"", b"not a zip file", None])
def test_a_damaged_or_foreign_entry_is_computed_again_and_replaced(private_cache, damage):
    model = RobotModel.from_xml_string(ARM)
    base_parameters(model)
    (entry,) = entries(private_cache)
    if damage is None:  # a readable entry for other parameters under this key
        other = base_parameters(model.with_joint_terms(("Fv",)))
        np.savez(entry, **other.to_arrays())
    else:
        entry.write_bytes(damage)
    same(base_parameters(model), computed(model))
    same(BaseParameters.from_arrays(dict(np.load(entry))), computed(model))


def test_an_unwritable_folder_only_costs_the_computation(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    monkeypatch.setenv("SYSID_CACHE_DIR", str(blocker / "cache"))
    model = RobotModel.from_xml_string(ARM)
    same(base_parameters(model), computed(model))


def test_payload_reductions_are_stored_too(private_cache):
    model = RobotModel.from_xml_string(ARM)
    first = payload_target(model, "l3")
    assert len(entries(private_cache)) == 1
    again = payload_target(RobotModel.from_xml_string(ARM), "l3")
    same(first.base, again.base)
    assert again.base.param_names == tuple(f"payload.{f}" for f in
                                           ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz"))
    assert payload_target(model, "l2").base.param_names == again.base.param_names
    assert len(entries(private_cache)) == 2  # another body: another entry


def test_the_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SYSID_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "sysid_ros"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "sysid_ros"
