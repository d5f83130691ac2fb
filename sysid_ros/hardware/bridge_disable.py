"""The bridge's disable path: disable frames until every motor confirms (state ≠ 1), the retries
with back-off (one control period up to :data:`~.bridge_types.DISABLE_RETRY_CAP` periods), the bus
re-opened after :data:`~.bridge_types.REOPEN_AFTER` failed rounds, the keeper thread that goes on
after ``deactivate`` while unconfirmed, the trip (disable in the same cycle, reported once) and the
loop's life after a trip (disable rounds, then state polls). It never gives up. A mixin of
:class:`~sysid_ros.hardware.bridge.Bridge`."""

import threading
import time

import can
import numpy as np

from sysid_ros.hardware.bridge_types import (
    CONFIRM_TIMEOUT,
    CONFIRM_TRIES,
    DISABLE_RETRY_CAP,
    REOPEN_AFTER,
    UNCONFIRMED_REPORT,
)
from sysid_ros.hardware.codec import REGISTER_REQUEST_ID as REGISTER_ID
from sysid_ros.hardware.codec import MotorState, Special, special_frame
from sysid_ros.hardware.codec_registers import refresh_frame
from sysid_ros.hardware.safety import (
    Trip,
    TripKind,
    WatchdogMode,
)
from sysid_ros.hardware.transport import BusError


class DisableKeeper:
    """Mixin: the disable path (see the module docstring)."""

    def disable_all(self, *, reason: str = "", tries: int = CONFIRM_TRIES, quiet: bool = False) -> list[str]:
        """Send disable to every motor, then re-send to those whose reply does not confirm it
        (state ≠ 1), ``tries`` rounds in all. Returns the joints not confirmed. Never raises: a bus
        error ends this attempt (``_bus_dead`` says so until a send goes through again); the
        callers try again (:meth:`_retry_disable`). ``quiet``: no log line when unconfirmed (a
        retry; its caller reports)."""
        if self.transport is None:
            return list(self.names)
        pending = np.ones(self.n, dtype=bool)
        try:
            self.transport.drain()  # replies older than the first disable frame prove nothing
            for _ in range(tries):
                for i in np.flatnonzero(pending):
                    self._send(self._mit_ids[i], special_frame(Special.DISABLE))
                self._bus_dead = False
                for i, fb in enumerate(self._collect_states(CONFIRM_TIMEOUT, pending)):
                    if fb is not None and fb.state != MotorState.ENABLED:
                        pending[i] = False
                if not pending.any():
                    break
        except BusError as exc:
            self._bus_dead = True
            self._disabled = False
            if not quiet:
                self.log.error("disabling the motors (%s) failed on the bus, the motors may be ENABLED: %s",
                               reason, exc)
            return [self.names[i] for i in np.flatnonzero(pending)]
        unconfirmed = [self.names[i] for i in np.flatnonzero(pending)]
        self._disabled = not unconfirmed
        if unconfirmed and not quiet:
            self.log.error("disable (%s) NOT confirmed by %s: they may be ENABLED", reason, unconfirmed)
        elif not unconfirmed:
            self.log.info("all %d motors disabled (%s), confirmed: %s", self.n, reason,
                          ", ".join(f"{m.joint} {m.state_text.split(' ')[0]}" for m in self.motors))
        return unconfirmed

    def _retry_disable(self, reason: str) -> float:
        """One more round of disable frames while the disable is not confirmed; the bus re-opened
        after :data:`REOPEN_AFTER` failed rounds (if this bridge opened it). Returns the wait [s]
        before the next round (doubling from one period up to :data:`DISABLE_RETRY_CAP` periods)."""
        now = time.monotonic()
        if self._retry_failures == 0:
            self._unconfirmed_since, self._retry_interval = now, self.config.period
        unconfirmed = self.disable_all(reason=reason, tries=1, quiet=True)
        if not unconfirmed:
            self.log.error("ALL MOTORS DISABLED (confirmed after %d more rounds, %.2f s): %s",
                           self._retry_failures + 1, now - self._unconfirmed_since, reason)
            self._retry_failures = 0
            return self.config.period
        self._retry_failures += 1
        if now - self._unconfirmed_report >= UNCONFIRMED_REPORT:
            self._unconfirmed_report = now
            self.log.error("MOTORS MAY BE ENABLED: disable not confirmed by %s for %.2f s (%d rounds, %s); "
                           "still sending disable frames", unconfirmed, now - self._unconfirmed_since,
                           self._retry_failures, "bus failing" if self._bus_dead else "no confirming reply")
        if self._bus_dead and self._retry_failures % REOPEN_AFTER == 0:
            self._reopen_bus()
        self._retry_interval = min(2.0 * self._retry_interval, DISABLE_RETRY_CAP * self.config.period)
        return self._retry_interval

    def _reopen_bus(self) -> None:
        """Close and open again a bus this bridge opened (an adapter unplugged and back, a
        bus-off that needs a restart); a bus handed in is the caller's to restore."""
        if self.transport is None or not self.transport.owned:
            return
        try:
            with self._bus_lock:
                self.transport.reopen()
            self.log.warning("CAN bus %s:%s re-opened", self.config.interface, self.config.channel)
        except (BusError, can.CanError, OSError) as exc:
            self.log.debug("re-opening the CAN bus failed: %s", exc)

    def _start_keeper(self) -> None:
        """After ``deactivate`` with the disable unconfirmed: a thread that re-sends disable frames
        until every motor confirms (or ``cleanup``)."""
        if self._keeper is not None:
            return
        self._keeper_stop.clear()
        self._retry_failures = 0

        def keep() -> None:
            while not self._keeper_stop.is_set() and not self._disabled:
                self._keeper_stop.wait(self._retry_disable("deactivate, retried"))

        self._keeper = threading.Thread(target=keep, name="damiao_bridge_disable", daemon=True)
        self._keeper.start()

    def _stop_keeper(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            self._keeper_stop.set()
            keeper.join(timeout=2.0)
    def _trip(self, trip: Trip) -> None:
        """Disable everything now (the same cycle), then report once: "disabled" only if every
        motor confirmed it, else "may be enabled" (the loop then re-sends disable frames until
        they confirm, :meth:`_after_trip`)."""
        if self.trip is not None:
            return
        self.trip = trip
        with self._lock:
            self._mode = WatchdogMode.DISABLE
        # after a bus error one round only here: the retries (with back-off) follow in the loop
        tries = 1 if trip.kind == TripKind.BUS_ERROR else CONFIRM_TRIES
        self._retry_failures = 0
        unconfirmed = self.disable_all(reason=trip.kind.value, tries=tries, quiet=True)
        if unconfirmed:
            self._unconfirmed_report = time.monotonic()
            self.log.error("MOTORS MAY BE ENABLED: %s; disable not confirmed by %s (%s): sending disable "
                           "frames until every motor confirms", trip, unconfirmed,
                           "bus failing" if self._bus_dead else "no confirming reply")
        else:
            self.log.error("ALL MOTORS DISABLED (confirmed): %s", trip)
        if self.on_trip is not None:
            try:
                self.on_trip(trip)
            except Exception as exc:  # a broken reporter must not hide the trip
                self.log.error("on_trip callback failed: %s", exc)

    def _after_trip(self, start: float) -> float:
        """The loop after a trip; returns the wait [s] until its next call. While the disable is
        not confirmed: one more disable round (back-off). Then: read the motors' states (refresh
        frames, no commands) at ``diagnostics_rate`` for the diagnostics; no joint states (no
        motor is enabled). A motor reporting enabled again starts the disable rounds again."""
        if not self._disabled:
            return self._retry_disable(f"after the trip: {self.trip.kind.value}")
        if self.transport is None:
            return 1.0 / self.config.diagnostics_rate
        try:
            for m in self.motors:
                self._send(REGISTER_ID, refresh_frame(m.can_id))
            replies = self._collect_states(min(0.02, 0.5 / self.config.diagnostics_rate))
        except BusError as exc:
            if not self._bus_dead:
                self.log.warning("polling the disabled motors failed: %s", exc)
            self._bus_dead = True
            return 1.0 / self.config.diagnostics_rate
        self._bus_dead = False
        enabled = [self.names[i] for i, r in enumerate(replies)
                   if r is not None and r.state == MotorState.ENABLED]
        if enabled:  # should never happen; disable again (until confirmed)
            self.log.error("MOTORS MAY BE ENABLED: %s report enabled after the trip: disabling again",
                           enabled)
            self._disabled, self._retry_failures = False, 0
            return 0.0
        return 1.0 / self.config.diagnostics_rate

