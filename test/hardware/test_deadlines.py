"""The bridge's deadlines sized from measured loop latency (sysid_ros.hardware.deadlines): the
rule ``max(configured, deadline_margin × (2 periods + worst lateness))``, capped by
``motor_timeout_max``, rounded up to the TIMEOUT register's 50 µs, and stated."""

from __future__ import annotations

import numpy as np
import pytest
from support.damiao_rig import CONFIG

from sysid_ros.hardware.bridge_config import load_bridge_config
from sysid_ros.hardware.deadlines import probe_latency, size_deadlines


def test_a_quiet_loop_keeps_the_configured_deadlines():
    cfg = load_bridge_config(CONFIG, rate=500.0)  # motor_timeout 0.1, command_timeout 0.1, margin 4
    d = size_deadlines(cfg, np.array([20e-6, 50e-6, 400e-6]), "SCHED_FIFO 50")
    assert d.heartbeat_worst == pytest.approx(2 / 500 + 400e-6)
    assert d.motor_timeout == pytest.approx(0.1) and d.command_timeout == pytest.approx(0.1)
    assert d.hold_timeout == cfg.hold_timeout and d.notes == ()
    assert d.latency_max == pytest.approx(400e-6) and d.samples == 3
    text = d.describe()
    assert "max 400 us over 3 cycles, SCHED_FIFO 50" in text and "motor CAN timeout 0.1 s" in text
    assert d.values()["motor_timeout_s"] == "0.1" and d.values()["scheduling"] == "SCHED_FIFO 50"


def test_a_late_loop_raises_the_motor_timeout_and_the_command_watchdog():
    cfg = load_bridge_config(CONFIG, rate=500.0)
    d = size_deadlines(cfg, np.array([1e-3, 30e-3]), "SCHED_OTHER")
    wanted = 4.0 * (2 / 500 + 30e-3)  # 0.136 s
    assert d.motor_timeout == pytest.approx(0.136)  # a whole number of 50 us register units
    assert round(d.motor_timeout / 50e-6, 9) == 2720
    assert d.command_timeout == pytest.approx(wanted)
    assert any("motor_timeout 0.1 s raised to 0.136 s" in n for n in d.notes)


def test_the_raise_is_capped_by_motor_timeout_max_and_said():
    cfg = load_bridge_config(CONFIG, rate=500.0, motor_timeout_max=0.3)
    d = size_deadlines(cfg, np.array([0.2]), "SCHED_OTHER")
    assert d.motor_timeout == pytest.approx(0.3)
    assert "capped at motor_timeout_max 0.3 s" in d.describe()
    assert "grant real-time scheduling" in d.describe()
    # a configured motor_timeout above the cap is kept, not lowered
    d = size_deadlines(load_bridge_config(CONFIG, rate=500.0, motor_timeout=1.0), np.array([0.2]), "x")
    assert d.motor_timeout == pytest.approx(1.0)


def test_no_motor_timeout_stays_off():
    cfg = load_bridge_config(CONFIG, rate=500.0, motor_timeout=0.0, unsafe_no_motor_timeout=True)
    d = size_deadlines(cfg, np.array([0.05]), "SCHED_OTHER")
    assert d.motor_timeout == 0.0 and "motor CAN timeout OFF" in d.describe()


def test_bad_realtime_parameters_are_refused_with_one_line():
    from sysid_ros.hardware.bridge_config import ConfigError

    with pytest.raises(ConfigError, match=r"realtime_priority must be 0 \(normal scheduling\) or a "
                                          r"SCHED_FIFO priority 1..99, got 100"):
        load_bridge_config(CONFIG, realtime_priority=100)
    with pytest.raises(ConfigError, match="deadline_margin >= 1"):
        load_bridge_config(CONFIG, deadline_margin=0.5)


def test_the_probe_measures_lateness_against_its_schedule():
    late = probe_latency(0.002, duration=0.02, cycles=5)
    assert late.shape == (10,) and np.all(late >= 0.0) and np.all(np.isfinite(late))
