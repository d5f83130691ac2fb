"""Online identification: causal conditioning, per-sample regression rows, recursive estimators.

Nothing here looks ahead: every sample is processed when it arrives, as on a live robot.

* :mod:`.conditioning` — :class:`CausalConditioner`, one causal low-pass and one delay for all signals;
* :mod:`.rows` — regression rows per sample (force, momentum, conservation, filtered, nuisance);
* :mod:`.rls`, :mod:`.rls_logdet` — the recursive estimators; :mod:`.row_weights` — residual weights;
* :mod:`.ekf` — :class:`AugmentedEKF`, the extended Kalman filter on ``[q, q̇, β]``;
  :mod:`.mhe` — ``MovingHorizon``, the constrained sliding-window program (imports cvxpy);
  :mod:`.drift` — the parameters' random walk both use; :mod:`.projection` — the EKF's exported
  estimate, projected onto the consistent, plausible set in its posterior's metric (imports cvxpy);
* :mod:`.estimator` — :class:`OnlineEstimator`, a row builder feeding an estimator, with diagnostics;
* :mod:`.options` — :class:`OnlineOptions`, the online methods and each option's help (light: what a
  node declares as parameters);
* :mod:`.session` — :class:`OnlineSession`: stream checks, gaps, conditioning, rows and estimator in
  one place, :class:`OnlineOptions` in, :class:`OnlineEstimate` out (the node and the CLI run it);
* :mod:`.stream` — a live joint-state stream as arrays (stamps, name → column map, torque map, the
  prior from a file): what the nodes hand their session; :mod:`.publication` — an estimate, its
  typed result and precision in one call;
* :mod:`.replay` — recorded data through a session, sample by sample.

The names below are loaded on first use (PEP 562): importing one module of the package (a node's
:mod:`.stream`) does not load the others and their compiled kernels and solvers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: public name -> the module of this package that defines it
_WHERE = {
    "CausalConditioner": "conditioning", "CausalFilter": "conditioning",
    "AugmentedEKF": "ekf", "EKFEstimator": "ekf",
    "WEIGHTINGS": "options", "OnlineEstimator": "estimator", "OnlineLog": "estimator",
    "RecursiveLeastSquares": "rls",
    "RLSLogDet": "rls_logdet",
    "ResidualWeights": "row_weights",
    "ConservationRows": "rows", "ForceRows": "rows", "MomentumRows": "rows", "Nuisance": "rows",
    "RowFilter": "rows", "separable_links": "rows",
    "ONLINE_METHODS": "options", "OnlineEstimate": "session", "OnlineOptions": "options",
    "OnlineSession": "session", "StreamEvent": "session",
}

if TYPE_CHECKING:
    from sysid_ros.core.online.conditioning import CausalConditioner, CausalFilter
    from sysid_ros.core.online.ekf import AugmentedEKF, EKFEstimator
    from sysid_ros.core.online.estimator import OnlineEstimator, OnlineLog
    from sysid_ros.core.online.options import ONLINE_METHODS, WEIGHTINGS, OnlineOptions
    from sysid_ros.core.online.rls import RecursiveLeastSquares
    from sysid_ros.core.online.rls_logdet import RLSLogDet
    from sysid_ros.core.online.row_weights import ResidualWeights
    from sysid_ros.core.online.rows import (
        ConservationRows,
        ForceRows,
        MomentumRows,
        Nuisance,
        RowFilter,
        separable_links,
    )
    from sysid_ros.core.online.session import OnlineEstimate, OnlineSession, StreamEvent


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})

__all__ = [
    "ONLINE_METHODS",
    "WEIGHTINGS",
    "AugmentedEKF",
    "CausalConditioner",
    "CausalFilter",
    "ConservationRows",
    "EKFEstimator",
    "ForceRows",
    "MomentumRows",
    "Nuisance",
    "OnlineEstimate",
    "OnlineEstimator",
    "OnlineLog",
    "OnlineOptions",
    "OnlineSession",
    "RLSLogDet",
    "RecursiveLeastSquares",
    "ResidualWeights",
    "RowFilter",
    "StreamEvent",
    "separable_links",
]
