"""The bridge's configuration: the shipped YAML file (wiring shared with the emulator node in
``/**``, limits from the MJCF and the motor table), the errors that say what was expected, and
the emulator parameter group."""

from __future__ import annotations

import numpy as np
import pytest
from support.damiao_rig import CONFIG
from support.robots import DEFAULT_ROBOT

from sysid_ros.core.model.motors import DAMIAO_MOTORS
from sysid_ros.hardware.bridge_config import BridgeConfig, ConfigError, load_bridge_config, load_parameters
from sysid_ros.hardware.emulated_bus import EmulatorOptions
from sysid_ros.hardware.wiring import wiring_from_parameters


def test_config_file_loads_six_joints_with_ids_and_limits():
    cfg = load_bridge_config(CONFIG)
    assert cfg.names == tuple(f"joint{i}" for i in range(1, 7))
    assert [j.motor for j in cfg.joints] == ["DM4340"] * 3 + ["DM4310"] * 3
    assert [j.can_id for j in cfg.joints] == [1, 2, 3, 4, 5, 6]
    assert [j.master_id for j in cfg.joints] == [0x11, 0x12, 0x13, 0x14, 0x15, 0x16]
    from sysid_ros.core.model.robot import RobotModel

    lower, upper = RobotModel.from_mjcf(DEFAULT_ROBOT).joint_limits()
    np.testing.assert_allclose([j.position_min for j in cfg.joints], lower, atol=1e-6)
    np.testing.assert_allclose([j.position_max for j in cfg.joints], upper, atol=1e-6)
    # velocity and torque limits: the motor table's VMAX and TMAX through the gear ratio (1 here)
    assert [j.velocity_limit for j in cfg.joints] == [DAMIAO_MOTORS[j.motor].vmax for j in cfg.joints]
    assert [j.torque_limit for j in cfg.joints] == [DAMIAO_MOTORS[j.motor].tmax for j in cfg.joints]
    assert cfg.interface == "socketcan" and cfg.channel == "can0" and cfg.rate == 700.0


def test_one_wiring_for_the_bridge_and_the_emulator_node():
    """The joints' wiring is written once (``/**``): the emulator node's section adds only what
    is its own, and both nodes read the same wiring."""
    bridge = load_parameters(CONFIG, node_name="damiao_bridge")
    emulator = load_parameters(CONFIG, node_name="damiao_emulator")
    wiring = {k: v for k, v in emulator.items() if k.startswith("joints.")}
    assert set(wiring) == {"joints.names", "joints.motors", "joints.can_ids", "joints.master_ids",
                           "joints.directions", "joints.position_offsets", "joints.gear_ratios"}
    assert all(bridge[k] == v for k, v in wiring.items())
    assert wiring_from_parameters(emulator) == wiring_from_parameters(bridge)
    assert emulator["channel"] == "vcan0" and EmulatorOptions.from_parameters(emulator).clock == "realtime"
    assert EmulatorOptions.from_parameters(bridge) == EmulatorOptions(clock="lockstep")
    assert bridge["use_emulator"] is False


def test_gear_ratio_scales_the_default_limits():
    params = load_parameters(CONFIG, node_name="damiao_bridge")
    params["joints.gear_ratios"] = [2.0, 1, 1, 1, 1, 1]
    joint = BridgeConfig.from_parameters(params).joints[0]  # DM4340: VMAX 10, TMAX 28
    assert (joint.velocity_limit, joint.torque_limit) == (5.0, 56.0)
    params["joints.velocity_limits"] = [1.0] * 6
    assert BridgeConfig.from_parameters(params).joints[0].velocity_limit == 1.0


def test_config_errors_say_what_was_expected(tmp_path):
    params = {"joints.names": ["a", "b"], "joints.motors": ["DM4310"], "joints.can_ids": [1, 2],
              "joints.master_ids": [17, 18], "joints.position_min": [-1, -1], "joints.position_max": [1, 1],
              "joints.velocity_limits": [1, 1], "joints.torque_limits": [1, 1]}
    with pytest.raises(ConfigError, match=r"joints.motors has 1 entries, expected 2"):
        BridgeConfig.from_parameters(params)
    with pytest.raises(ConfigError, match=r"master_ids must differ from every can_id"):
        BridgeConfig.from_parameters({**params, "joints.motors": ["DM4310"] * 2,
                                      "joints.master_ids": [2, 18]})
    with pytest.raises(ConfigError, match="unknown motor model 'DM9999'"):
        BridgeConfig.from_parameters({**params, "joints.motors": ["DM4310", "DM9999"]})
    with pytest.raises(ConfigError, match=r"unknown bridge parameters \['emulator_payload'\]"):
        BridgeConfig.from_parameters({**params, "joints.motors": ["DM4310"] * 2, "emulator_payload": ""})
    assert load_bridge_config(CONFIG, rate=500, max_missed_replies=3.0).rate == 500.0  # YAML ints are fine
    with pytest.raises(ConfigError, match=r"max_missed_replies: expected an integer, got 2.5"):
        load_bridge_config(CONFIG, max_missed_replies=2.5)
    bad = tmp_path / "bad.yaml"
    bad.write_text("other_node:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="no 'damiao_bridge: ros__parameters:' section"):
        load_bridge_config(bad)


def test_emulator_options_are_checked():
    with pytest.raises(ConfigError, match=r"emulator\.clock must be 'lockstep' or 'realtime', got 'fast'"):
        EmulatorOptions.from_parameters({"emulator.clock": "fast"})
    with pytest.raises(ConfigError, match=r"emulator\.physics_rate: expected a number, got 'x'"):
        EmulatorOptions.from_parameters({"emulator.physics_rate": "x"})
    assert EmulatorOptions.from_parameters({"emulator.physics_rate": 500}).physics_rate == 500.0
