"""The bridge in a process of its own (:class:`~sysid_ros.hardware.bridge_process.BridgeProcess`
and its worker, no ROS): the YAM parameters file with emulated motors in lockstep, a real worker
process, real sockets. Every cycle's joint state reaches the host (lockstep stamps one period apart,
none missing); refused and unknown-joint commands come back as counted warnings; the worker's
errors come back as their own class with their message; deactivate disables every motor
(confirmed, in the worker); shutdown ends the worker."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest
from support.damiao_rig import CONFIG, N_JOINTS, RATE, ROOT, wait_until

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


def test_a_sigterm_during_the_disable_after_the_host_went_away_does_not_cut_it_short():
    """A killed host closes its end of the RPC socket first and Linux sends the worker its
    ``PR_SET_PDEATHSIG`` SIGTERM a moment later, while the worker is disabling the motors. Here the
    host (this test, speaking the worker's documented protocol) closes the socket, waits for the
    worker's "host went away" line and then sends SIGTERMs until the worker ends: every motor is
    disabled all the same (the emulated motors' states at stop all 0x0, not left enabled for their
    CAN timeout) and the worker exits 0. (Seen in CI: a handler that raised landed inside the
    disable; the motors stopped on their CAN timeout, state 0xD.)"""
    rpc_host, rpc_worker = socket.socketpair()
    stream_host, stream_worker = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", ""))
                                                       if p), SYSID_BRIDGE_HOST_PID=str(os.getpid()))
    fds = (rpc_worker.fileno(), stream_worker.fileno())
    worker = subprocess.Popen([sys.executable, "-m", "sysid_ros.hardware.bridge_worker", *map(str, fds)],
                              pass_fds=fds, stdin=subprocess.DEVNULL, env=env)
    rpc_worker.close()
    stream_worker.close()
    rpc, stream = Connection(rpc_host.detach()), Connection(stream_host.detach())
    lines: list[str] = []
    samples = [0]

    def read_stream() -> None:
        while True:
            try:
                batch = stream.recv()
            except (EOFError, OSError):
                return
            for event in batch:
                if event[0] == "sample":
                    samples[0] += 1
                elif event[0] == "log":
                    lines.append(event[2])

    reader = threading.Thread(target=read_stream, daemon=True)
    reader.start()
    try:
        for seq, (method, args) in enumerate((("configure", (_parameters(),)), ("activate", ()))):
            rpc.send((seq, method, args))
            assert rpc.poll(60.0), f"no answer to {method}"
            answer = rpc.recv()
            assert answer[:2] == (seq, "ok"), answer
        assert wait_until(lambda: samples[0] > 50)  # the loop runs: the motors are enabled
        rpc.close()  # the host is gone ...
        assert wait_until(lambda: any("host process went away" in line for line in lines))
        deadline = time.monotonic() + 30.0
        while worker.poll() is None and time.monotonic() < deadline:  # ... and its death signal
            with contextlib.suppress(ProcessLookupError):               # arrives during the disable
                os.kill(worker.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=0.001)
        assert worker.wait(timeout=30) == 0
        reader.join(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        stream.close()
    stop_line = [line for line in lines if line.startswith("emulator motor states at stop")]
    assert stop_line == ["emulator motor states at stop: "
                         + ", ".join(f"joint{i}=0x0" for i in range(1, N_JOINTS + 1))], lines[-10:]
    assert any(line.startswith(f"all {N_JOINTS} motors disabled (") and "confirmed" in line
               for line in lines), lines[-10:]
    assert not any(line.startswith("shutdown: ") for line in lines), lines[-10:]
