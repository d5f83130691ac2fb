"""StateClock: the joint states' time read from the local clock, however the states are delivered."""

from __future__ import annotations

import numpy as np
import pytest

from sysid_ros.core.errors import SysIdError
from sysid_ros.core.excitation.state_clock import StateClock


def _deliver(clock: StateClock, stamps: np.ndarray, offset: float, factor: float, delays: np.ndarray,
             every: int) -> float:
    """States stamped ``stamps`` (time base ``offset + factor·local``), one in ``every`` taken,
    each received ``delay`` late; returns the last reception time."""
    received = 0.0
    for k in range(0, len(stamps), every):
        received = (stamps[k] - offset) / factor + delays[k]
        clock.observe(stamps[k], received)
    return received


@pytest.mark.parametrize("factor", [1.0, 0.5, 0.73])
def test_the_states_time_now_from_late_and_sparse_deliveries(factor):
    """States at 500 Hz taken one in ten, each 0-20 ms late (a subscriber on a busy host): the
    clock gives the states' time at a local instant within the least delay of the window (here
    <= 2 ms), at a real-time factor of 1 and of a slowed simulator (whose rate it measures)."""
    rng = np.random.default_rng(0)
    stamps = 100.0 + np.arange(5000) / 500.0
    delays = rng.uniform(0.0, 0.02, len(stamps))
    delays[::97] = 0.001  # now and then a state comes at once
    clock = StateClock(window=2.0, timeout=1.0)
    last = _deliver(clock, stamps, offset=100.0, factor=factor, delays=delays, every=10)
    for ahead in (0.0, 0.003, 0.01):
        now = last + ahead
        truth = 100.0 + factor * now
        assert clock.now(now) == pytest.approx(truth, abs=2e-3 * max(factor, 1.0))
    assert clock.rate == pytest.approx(factor, rel=0.05)


def test_silence_stops_the_clock_and_time_never_goes_back():
    clock = StateClock(window=0.5, timeout=0.5)
    assert clock.now(0.0) is None  # no state yet
    clock.observe(10.0, 1.0)
    assert clock.now(1.2) == pytest.approx(10.2)
    assert clock.now(1.6) is None  # 0.6 s of silence > timeout: no commands
    # states 0-30 ms late as a command thread asks every 2 ms: its times never go back, even when
    # the least-delayed state leaves the window
    rng = np.random.default_rng(1)
    times, local, pending = [], 2.0, []
    for k in range(2000):
        local += 0.002
        if k % 7 == 0:  # a state stamped now, received 0-30 ms later
            pending.append((10.0 + local, local + rng.uniform(0.0, 0.03)))
        while pending and pending[0][1] <= local:
            clock.observe(pending.pop(0)[0], local)
        times.append(clock.now(local))
    times = times[next(i for i, t in enumerate(times) if t is not None):]  # from the first state on
    assert None not in times and np.all(np.diff(times) >= 0.0)
    assert times[-1] == pytest.approx(10.0 + local, abs=0.015)
    clock.observe(5.0, local)  # stamps going back (a restarted simulator): a fresh estimate
    assert clock.now(local) == pytest.approx(5.0)


def test_bad_options_are_refused():
    with pytest.raises(SysIdError, match="expected window > 0 s"):
        StateClock(window=0.0)
