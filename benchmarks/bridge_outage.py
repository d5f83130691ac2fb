"""How fast the Damiao bridge disables every motor once a failed bus is back.

6 emulated motors (the default robot, emulator in lockstep) on a python-can virtual bus in this
process; the arm moves toward a target; the bus then refuses every frame (ENOBUFS, as a bus-off or
an unplugged adapter gives) for each ``--outages`` duration. The motors' own CAN timeout is set
long (5 s) so that only the bridge can stop them. Printed per outage: the time from the bus being
back to every emulated motor reporting disabled, in milliseconds and in control periods (the
issue's limit: 10 periods), and the bridge's disable rounds (retries with back-off) in between.

    python benchmarks/bridge_outage.py [--rate 500] [--outages 0.05 0.2 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.hardware.bridge import Bridge  # noqa: E402
from sysid_ros.hardware.bridge_config import load_bridge_config  # noqa: E402
from sysid_ros.hardware.codec import MotorState  # noqa: E402
from sysid_ros.hardware.emulated_bus import EmulatedBus  # noqa: E402


def one_outage(rate: float, outage: float) -> tuple[float, int]:
    """Seconds from the bus being back to all motors disabled, and the disable rounds sent."""
    config = load_bridge_config(ROOT / "config" / "yam_damiao.yaml", rate=rate, command_timeout=30.0,
                                motor_timeout=5.0, max_missed_replies=50)
    emulated = EmulatedBus(config.joints, period=config.period)
    config = config.replace(interface="virtual", channel=emulated.channel)
    emulated.start()
    bridge = Bridge(config, bus=emulated.bus, timebase=emulated.timebase,
                    logger=logging.getLogger("bench"))
    emu = emulated.emulator
    try:
        bridge.configure()
        bridge.activate()
        time.sleep(0.2)
        target = np.array(bridge.frames.position) + np.array([0.3, 0, 0, 0.3, 0, 0])
        bridge.submit_command(list(config.names), target.tolist(), kp=[20.0] * 6, kd=[2.0] * 6)
        time.sleep(0.3)
        emu.inject_bus_off()
        time.sleep(outage)
        sent = bridge.transport.sent
        back = time.perf_counter()
        emu.clear_bus_off()
        while not all(m.state == MotorState.DISABLED for m in emu.motors):
            if time.perf_counter() - back > 5.0:
                raise RuntimeError("the motors were not disabled within 5 s of the bus coming back")
            time.sleep(1e-4)
        delay = time.perf_counter() - back
        rounds = (bridge.transport.sent - sent) // len(config.joints)
        return delay, rounds
    finally:
        bridge.shutdown()
        emulated.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--outages", type=float, nargs="+", default=[0.05, 0.2, 2.0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    period = 1.0 / args.rate
    print(f"bus outage → every motor disabled, {args.rate:g} Hz (period {1e3 * period:.1f} ms)")
    for outage in args.outages:
        runs = [one_outage(args.rate, outage) for _ in range(args.repeats)]
        delays = np.array([d for d, _ in runs])
        print(f"outage {outage:5.2f} s: back→disabled median {1e3 * np.median(delays):6.2f} ms "
              f"({np.median(delays) / period:4.1f} periods), max {1e3 * delays.max():6.2f} ms "
              f"({delays.max() / period:4.1f} periods); frames after the bus came back: "
              f"{[r for _, r in runs]} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
