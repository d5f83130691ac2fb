"""Online identification: causal conditioning, per-sample regression rows, recursive estimators.

Nothing here looks ahead: every sample is processed when it arrives, as on a live robot.

* :mod:`.conditioning` — :class:`CausalConditioner`, one causal low-pass and one delay for all signals;
* :mod:`.rows` — regression rows per sample (force, momentum, conservation, filtered, nuisance);
* :mod:`.rls`, :mod:`.rls_logdet` — the recursive estimators; :mod:`.row_weights` — residual weights;
* :mod:`.estimator` — :class:`OnlineEstimator`, a row builder feeding an estimator, with diagnostics;
* :mod:`.replay` — recorded data through an online estimator, sample by sample.
"""

from sysid_ros.core.online.conditioning import CausalConditioner, CausalFilter
from sysid_ros.core.online.estimator import WEIGHTINGS, OnlineEstimator, OnlineLog
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

__all__ = [
    "WEIGHTINGS",
    "CausalConditioner",
    "CausalFilter",
    "ConservationRows",
    "ForceRows",
    "MomentumRows",
    "Nuisance",
    "OnlineEstimator",
    "OnlineLog",
    "RLSLogDet",
    "RecursiveLeastSquares",
    "ResidualWeights",
    "RowFilter",
    "separable_links",
]
