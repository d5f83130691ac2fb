"""The collision monitor: the momentum observer (:mod:`.observer`) on a model with the detector
(:mod:`.detector`) on its residual, online (:class:`CollisionMonitor`, what the
``collision_monitor`` node runs) and over a recording (:func:`monitor_recording`, ``sysid
monitor``), plus the model's parameters from an identification's ``result.json``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sysid_ros.core.data.dataset import Dataset
from sysid_ros.core.errors import DataError, SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.monitor.detector import (
    DEFAULT_MARGIN,
    DEFAULT_PEAK_FACTOR,
    DEFAULT_RELEASE,
    DEFAULT_SIGMA_FACTOR,
    ContactDetector,
    ContactEvent,
    Thresholds,
    detect_contacts,
)
from sysid_ros.core.monitor.observer import (
    DEFAULT_GAIN,
    SETTLE_TIME_CONSTANTS,
    SETTLE_TOLERANCE,
    MomentumObserver,
    observer_residuals,
    settled,
)
from sysid_ros.core.result_file import ResultFile

log = logging.getLogger(__name__)

__all__ = ["CollisionMonitor", "MonitorReport", "calibrate", "monitor_recording", "parameters_from_result"]


def parameters_from_result(model: RobotModel, path: str | Path) -> np.ndarray:
    """θ of ``model`` with the exported parameters of a ``result.json`` (``sysid identify``,
    ``batch_solver``) written over the model's own values (names it does not hold keep them;
    friction offsets ``Fo`` come only from here: an MJCF cannot hold them)."""
    return ResultFile.model_parameters(model, path)


def _recording(model: RobotModel, data: Dataset) -> Dataset:
    model.check_fixed_base("the collision monitor")
    data = data.for_model(model)
    if not data.has_velocity:
        raise DataError("the collision monitor needs measured joint velocities (JointState velocity)")
    return data


def calibrate(model: RobotModel, theta: np.ndarray, data: Dataset, *, gain: float = DEFAULT_GAIN,
              sigma_factor: float = DEFAULT_SIGMA_FACTOR, peak_factor: float = DEFAULT_PEAK_FACTOR,
              margin: float = DEFAULT_MARGIN) -> Thresholds:
    """Thresholds from the observer's residual over a contact-free recording ``data`` (e.g. the
    identification run): ``max(sigma_factor · rms, peak_factor · peak) + margin`` per joint [N·m]
    (:meth:`Thresholds.calibrate`), over the samples where the observer has :func:`settled` (not
    the first ``5/gain`` seconds, nor those after a gap that restarted it)."""
    data = _recording(model, data)
    still = [name for name, dq in zip(model.dof_joint_names, data.dq.T, strict=True)
             if not (dq.min() < 0 < dq.max())]
    if still:
        log.warning("%s: joints %s never reverse in the calibration data: their thresholds miss the "
                    "residual of Coulomb friction at a reversal (expect false alarms; calibrate on a "
                    "whole excitation period)", data.source or "calibration", still)
    r = observer_residuals(model, theta, data.t, data.q, data.dq, data.tau, gain=gain)
    keep = settled(data.t, gain)
    if keep.sum() < 2:
        settle = SETTLE_TIME_CONSTANTS / gain
        raise DataError(f"{data.source or 'calibration'}: fewer than 2 samples where the observer has "
                        f"settled ({SETTLE_TIME_CONSTANTS:g}/K = {settle:g} s after its start and after each "
                        f"gap longer than 1/K); give a longer contact-free recording")
    return Thresholds.calibrate(r[keep], sigma_factor=sigma_factor, peak_factor=peak_factor, margin=margin)


@dataclass(frozen=True)
class MonitorReport:
    """A recording monitored: ``t (N,)`` [s], ``residual (N, n)`` [N·m], the ``events`` and the
    ``thresholds`` used, ``joint_names``."""

    t: np.ndarray
    residual: np.ndarray
    events: list[ContactEvent]
    thresholds: Thresholds
    joint_names: tuple[str, ...]

    @property
    def contacts(self) -> list[ContactEvent]:
        """The onsets only."""
        return [e for e in self.events if e.kind == "contact"]


def monitor_recording(model: RobotModel, theta: np.ndarray, data: Dataset, thresholds: Thresholds, *,
                      gain: float = DEFAULT_GAIN, release: float = DEFAULT_RELEASE) -> MonitorReport:
    """Run the observer and the detector over a recording (the same events as the node)."""
    data = _recording(model, data)
    r = observer_residuals(model, theta, data.t, data.q, data.dq, data.tau, gain=gain)
    names = model.dof_joint_names
    return MonitorReport(data.t, r, detect_contacts(data.t, r, names, thresholds, release=release),
                         thresholds, names)


class CollisionMonitor:
    """Observer and detector sample by sample: :meth:`update` returns the residual and the events.
    Without thresholds it first calibrates them over ``calibration_time`` [s] of samples (which
    must be free of contact; those before the observer has settled after its start or a restart,
    :data:`~.observer.SETTLE_TIME_CONSTANTS` ``/gain``, are not counted), then detects."""

    def __init__(self, model: RobotModel, theta: np.ndarray, *, thresholds: Thresholds | None = None,
                 calibration_time: float = 0.0, gain: float = DEFAULT_GAIN,
                 sigma_factor: float = DEFAULT_SIGMA_FACTOR, peak_factor: float = DEFAULT_PEAK_FACTOR,
                 margin: float = DEFAULT_MARGIN, release: float = DEFAULT_RELEASE) -> None:
        if thresholds is None and not calibration_time > 0:
            raise SysIdError("give thresholds or a calibration time > 0 s to derive them from")
        self.model = model
        self.joint_names = model.dof_joint_names
        self.observer = MomentumObserver(model, theta, gain=gain)
        self.calibration_time = float(calibration_time)
        self._options = {"sigma_factor": sigma_factor, "peak_factor": peak_factor, "margin": margin}
        self.release = release
        self._calibration: list[np.ndarray] = []
        self._t0: float | None = None
        self._settled_at = -np.inf  # [s] when the observer's residual counts for calibration
        self.detector = None if thresholds is None else ContactDetector(self.joint_names, thresholds,
                                                                        release=release)

    @property
    def thresholds(self) -> Thresholds | None:
        return None if self.detector is None else self.detector.thresholds

    def prepare(self) -> None:
        """Set up now what the first samples would (the observer's compiled regressors: numba's
        import and CPU target, the kernels' disk cache, ~1 s of CPU), on a throwaway observer of
        the same model at its reference pose: nothing of this monitor changes. A node calls it in
        a thread of its own once it is ready."""
        observer = MomentumObserver(self.model, self.observer.theta, gain=self.observer.gain)
        q, dq = self.model.mj.qpos0.copy(), np.zeros(self.model.nv)
        observer.update(0.0, q, dq, np.zeros(self.model.nv))

    def update(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray
               ) -> tuple[np.ndarray, list[ContactEvent]]:
        """Residual ``(n,)`` [N·m] and events of the measurement at ``t`` [s] (see
        :meth:`MomentumObserver.update` for the errors)."""
        restarts = self.observer.restarts
        r = self.observer.update(t, q, dq, tau)
        if self.detector is not None:
            return r, self.detector.update(t, r)
        if self._t0 is None or self.observer.restarts != restarts:
            self._settled_at = t + SETTLE_TIME_CONSTANTS / self.observer.gain
        if self._t0 is None:
            self._t0 = t
        if t >= self._settled_at - SETTLE_TOLERANCE:
            self._calibration.append(r)
        if t - self._t0 >= self.calibration_time and len(self._calibration) >= 2:
            self.detector = ContactDetector(
                self.joint_names, Thresholds.calibrate(np.array(self._calibration), **self._options),
                release=self.release)
            self._calibration = []
        return r, []
