"""Collision detection on an identified model: the generalised-momentum residual observer, per-joint
thresholds from residual statistics and contact events (overview seed: "monitor residual
τ_meas − τ_predicted to detect unexpected contact")."""

from sysid_ros.core.monitor.detector import ContactDetector, ContactEvent, Thresholds, detect_contacts
from sysid_ros.core.monitor.observer import (
    DEFAULT_GAIN,
    MomentumObserver,
    MomentumTerms,
    momentum_terms,
    observer_residuals,
    residuals_of,
)
from sysid_ros.core.monitor.session import (
    CollisionMonitor,
    MonitorReport,
    calibrate,
    monitor_recording,
    parameters_from_result,
)

__all__ = ["DEFAULT_GAIN", "CollisionMonitor", "ContactDetector", "ContactEvent", "MomentumObserver",
           "MomentumTerms", "MonitorReport", "Thresholds", "calibrate", "detect_contacts", "momentum_terms",
           "monitor_recording", "observer_residuals", "parameters_from_result", "residuals_of"]
