"""The bridge's control loop asks for real-time scheduling in its own thread: granted where the
host allows it (this host's root has CAP_SYS_NICE), and where it does not, the loop runs with
normal scheduling and says so once, clearly — checked in a process without CAP_SYS_NICE
(``setpriv``), as an unprivileged user without an rtprio limit would be."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest
from support.damiao_rig import ROOT, WAIT, rigs

from sysid_ros.hardware.realtime import request_realtime

rig_factory = pytest.fixture(rigs, name="rig_factory")


def _host_grants_fifo() -> bool:
    """Whether this process may use SCHED_FIFO (asked in a throw-away thread)."""
    got = []
    thread = threading.Thread(target=lambda: got.append(request_realtime(1, lock_memory=False).granted))
    thread.start()
    thread.join(WAIT)
    return bool(got and got[0])


def test_the_loop_thread_gets_sched_fifo_and_states_its_deadlines(rig_factory, caplog):
    if not _host_grants_fifo():
        pytest.skip("this host refuses SCHED_FIFO (the refusal is tested below)")
    caplog.set_level("INFO")
    rig = rig_factory(realtime_priority=42)
    rig.bridge.configure()
    rig.bridge.activate()
    rig.run_cycles(20)
    assert rig.bridge.grant.granted and rig.bridge.grant.scheduling == "SCHED_FIFO 42"
    assert rig.bridge._thread.name == "damiao_bridge_loop"
    d = rig.bridge.status().deadlines
    assert d.scheduling == "SCHED_FIFO 42" and d.samples >= 50
    assert d.motor_timeout >= 0.1 and d.command_timeout >= 0.1
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("deadlines from the loop's measured wake-up latency") and "SCHED_FIFO 42"
               in line for line in lines), lines
    assert "damiao_bridge control loop: real-time scheduling SCHED_FIFO 42, memory locked (mlockall)" in lines
    assert rig.bridge.trip is None


_REFUSED = """
import logging, sys
sys.path.insert(0, {test!r})
from support.damiao_rig import rig_config, wait_until
from sysid_ros.hardware.emulated_bus import EmulatedBus, EmulatorOptions
from sysid_ros.hardware.bridge import Bridge
logging.basicConfig(level=logging.INFO, format="%(message)s")
cfg = rig_config()
emulated = EmulatedBus(cfg.joints, period=cfg.period, options=EmulatorOptions(realtime_priority=0)).start()
samples = []
bridge = Bridge(cfg.replace(interface="virtual", channel=emulated.channel), bus=emulated.bus,
                on_sample=samples.append, timebase=emulated.timebase)
bridge.configure()
for _ in range(2):  # said once, not once per activation
    bridge.activate()
    n = len(samples)
    assert wait_until(lambda: len(samples) > n + 50), "the loop did not run"
    assert bridge.trip is None, bridge.trip
    print("SCHEDULING", bridge.grant.scheduling, bridge.status().deadlines.scheduling, flush=True)
    bridge.deactivate()
bridge.shutdown()
emulated.close()
"""


@pytest.mark.slow
def test_a_refused_realtime_request_is_said_once_and_the_loop_runs(tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to take CAP_SYS_NICE away from a child process")
    script = _REFUSED.format(test=str(ROOT / "test"))
    out = subprocess.run(["setpriv", "--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice",
                          sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    refused = [line for line in text.splitlines()
               if line.startswith("damiao_bridge control loop: real-time scheduling NOT fully granted")]
    assert len(refused) == 1, text
    assert "SCHED_FIFO priority 50: [Errno 1] Operation not permitted" in refused[0]
    assert "the thread runs with SCHED_OTHER, memory locked" in refused[0]
    assert "/etc/security/limits.d (docs/damiao-bridge.md)" in refused[0]
    assert text.count("SCHEDULING SCHED_OTHER SCHED_OTHER") == 2
    assert "ALL MOTORS DISABLED" not in text and "all 6 motors disabled (deactivate), confirmed" in text
