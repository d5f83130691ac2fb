"""The bridge in a process of its own (:class:`~sysid_ros.hardware.bridge_process.BridgeProcess`
and its worker, no ROS): the YAM parameters file with emulated motors in lockstep, a real worker
process, real sockets. Every cycle's joint state reaches the host (lockstep stamps one period apart,
none missing); refused and unknown-joint commands come back as counted warnings; the worker's
errors come back as their own class with their message; deactivate disables every motor
(confirmed, in the worker); shutdown ends the worker."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from support.damiao_rig import CONFIG, N_JOINTS, RATE, wait_until

from sysid_ros.core.errors import SysIdError
from sysid_ros.hardware.bridge_config import BridgeConfig, load_parameters
from sysid_ros.hardware.bridge_process import BridgeProcess, EmulatorHandle
from sysid_ros.hardware.bridge_types import BridgeError
from sysid_ros.hardware.codec import MotorState


def _parameters(**overrides) -> dict:
    params = load_parameters(CONFIG, node_name="damiao_bridge")
    params.update(use_emulator=True, rate=RATE, max_missed_replies=50, **overrides)
    return params


def test_the_worker_runs_the_bridge_and_every_joint_state_reaches_the_host():
    params = _parameters()
    config = BridgeConfig.from_parameters(params)
    stamps: list[float] = []
    positions: list[list[float]] = []
    warnings: list[tuple[str, str]] = []
    lines: list[str] = []

    class Log:
        def __getattr__(self, level):
            return lambda msg, *args: lines.append(f"{level}: {msg % args}")

    def on_sample(stamp, position, velocity, effort):
        stamps.append(stamp)
        positions.append(position)

    bridge = BridgeProcess(config, params, on_sample=on_sample,
                           on_warning=lambda key, text: warnings.append((key, text)), logger=Log())
    try:
        bridge.configure()
        names, values = bridge.truth  # the emulated robot's parameters, for the estimator's scoring
        assert len(names) == len(values) > 0 and all(math.isfinite(v) for v in values)
        emulator = EmulatorHandle(bridge)
        assert emulator.motor_states() == [MotorState.DISABLED] * N_JOINTS
        bridge.activate()
        assert wait_until(lambda: len(stamps) > 200)
        assert emulator.motor_states() == [MotorState.ENABLED] * N_JOINTS
        assert all(len(p) == N_JOINTS and all(math.isfinite(q) for q in p) for p in positions[:200])
        bridge.submit_command(["joint1", "gripper"], [0.0, 0.1])
        bridge.submit_command(["joint1"], [math.nan])
        assert wait_until(lambda: {k for k, _ in warnings} >= {"unknown_joints", "rejected_commands"})
        text = dict(warnings)
        assert "['gripper']" in text["unknown_joints"] and "joint1" in text["unknown_joints"]
        assert "MotorCommand refused" in text["rejected_commands"]
        with pytest.raises(BridgeError, match="clear_fault needs a configured, inactive bridge, it is act"):
            bridge.clear_fault()  # raised in the worker, the same class and words here
        assert bridge.deactivate() == []  # every motor's disable confirmed
        assert emulator.motor_states() == [MotorState.DISABLED] * N_JOINTS
        status = bridge.status()
        assert status.phase == "configured" and status.disabled and status.trip is None
        count = len(stamps)
        # lockstep: one period of emulated time per round; a lost state would leave a wider step
        steps = np.diff(stamps[:count])
        assert np.allclose(steps, config.period, rtol=0, atol=1e-6), (steps.min(), steps.max())
        assert bridge.samples == count
        assert any("deadlines from the loop's measured wake-up latency" in line for line in lines)
        pid = bridge.pid
    finally:
        bridge.shutdown()
    assert not bridge.alive and not os.path.exists(f"/proc/{pid}")
    assert any("emulator motor states at stop" in line for line in lines)  # said before it ended
    with pytest.raises(BridgeError, match="not running"):
        bridge.status()


def test_a_bad_emulator_option_is_refused_by_the_worker_which_ends():
    """A payload that cannot be parsed fails in the worker (MuJoCo side): the host gets the
    worker's error class and words, and no process is left running."""
    params = _parameters(**{"emulator.payload": "0.5kg somewhere"})
    bridge = BridgeProcess(BridgeConfig.from_parameters(params), params)
    with pytest.raises(SysIdError, match=r"expected a payload body=NAME,mass=KG,.*got '0.5kg somewhere'"):
        bridge.configure()
    assert bridge.pid is not None and not bridge.alive and not os.path.exists(f"/proc/{bridge.pid}")
