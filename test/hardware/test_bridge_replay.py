"""The bridge replaying an exported trajectory file on emulated motors (virtual bus, lockstep
physics): the ramp from the measured pose, the file tracked, its end held; a file of other joints
is refused before anything is enabled."""

from __future__ import annotations

import numpy as np
import pytest
from support.damiao_rig import is_special, rigs

from sysid_ros.core.data.trajectory_file import TrajectoryFile, write_trajectory_file
from sysid_ros.core.errors import DataError
from sysid_ros.hardware.bridge import BridgeError
from sysid_ros.hardware.codec import Special

rig_factory = pytest.fixture(rigs, name="rig_factory")


@pytest.mark.slow
def test_replay_of_a_trajectory_file(rig_factory, tmp_path):
    t = np.arange(0, 1501) / 1000.0
    n = t.size
    pos = np.column_stack([0.3 * np.sin(2 * np.pi * t / 1.5), np.full(n, 1.047), np.full(n, 1.2)])
    vel = np.column_stack([0.3 * 2 * np.pi / 1.5 * np.cos(2 * np.pi * t / 1.5), np.zeros(n), np.zeros(n)])
    traj = TrajectoryFile(t, ("joint1", "joint2", "joint3"), ("DM4340",) * 3, pos, vel, np.zeros_like(pos),
                          np.full_like(pos, 80.0), np.full_like(pos, 6.0))
    path = write_trajectory_file(tmp_path / "excite.csv", traj)
    rig = rig_factory(replay_file=str(path), replay_ramp_time=0.3)
    rig.bridge.configure()
    rig.bridge.activate()
    with pytest.raises(BridgeError, match="being replayed"):
        rig.bridge.submit_command(["joint1"], [0.0])
    assert rig.wait_running(rig.done.is_set), rig.bridge.status()
    assert rig.bridge.trip is None
    replay = rig.bridge.replay
    samples = list(rig.samples)  # the loop goes on appending
    stamps = np.array([s.stamp for s in samples])
    q = np.array([s.position for s in samples])
    t_replay = stamps - stamps[0]
    inside = (t_replay > replay.ramp_time + 0.2) & (t_replay < replay.duration - 0.05)
    ref = np.array([replay.targets(x).position for x in t_replay[inside]])
    err = q[inside, :3] - ref[:, :3]
    fresh = np.array([s.fresh for s in samples])[inside, :3]
    assert fresh.mean() > 0.8  # late replies (a loaded machine) count as missed
    rms = np.sqrt(np.mean(np.where(fresh, err, 0.0) ** 2, axis=0))
    assert rms[0] < 0.02, rms          # joint1 (vertical axis) tracks within a loop period's lag
    assert np.all(rms[1:] < 0.1), rms  # joints 2-3 sag under gravity (PD only, no feed-forward)
    end_error = np.abs(rig.emulator.joint_positions()[:3] - pos[-1])
    assert np.all(end_error < [0.03, 0.1, 0.1]), end_error  # holds the end (2-3 sag under gravity)


def test_replay_file_of_other_joints_is_refused(rig_factory, tmp_path):
    t = np.array([0.0, 1.0])
    one = np.zeros((2, 1))
    path = write_trajectory_file(tmp_path / "wrong.csv",
                                 TrajectoryFile(t, ("elbow",), ("DM4340",), one, one, one, one, one))
    rig = rig_factory(replay_file=str(path))
    rig.bridge.configure()
    with pytest.raises(DataError, match=r"joints \['elbow'\] are not configured on the bridge"):
        rig.bridge.activate()
    assert not any(is_special(f, Special.ENABLE) for f in rig.monitor.frames)
