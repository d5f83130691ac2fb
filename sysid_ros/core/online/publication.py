"""What an online estimator publishes at one moment, computed in one call from its session.

The ``estimator`` node asks :func:`publication` once per publication and converts what comes
back to messages (``ParameterEstimate`` from :attr:`Publication.result`, ``Precision``, the
payload's ``Inertia``): one hop into the core and one back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sysid_ros.core.online.precision import Precision, estimate_precision
from sysid_ros.core.online.session import OnlineEstimate, OnlineSession
from sysid_ros.core.result import IdentificationResult

__all__ = ["Publication", "publication"]


@dataclass(frozen=True)
class Publication:
    """``estimate`` (the session's snapshot), ``result`` (the same estimate as the batch path's
    typed result, :meth:`OnlineEstimate.to_result`) and ``precision`` (the relative std of each
    identified direction, :func:`~sysid_ros.core.online.precision.estimate_precision`)."""

    estimate: OnlineEstimate
    result: IdentificationResult
    precision: Precision

    @property
    def stamp_ns(self) -> int:
        """[ns] the data time of the last sample folded into the estimate (0 before any)."""
        t = self.estimate.time
        return round(t * 1e9) if math.isfinite(t) else 0

    def payload_ready(self, goal: float) -> bool:
        """A payload estimate whose every required direction is within ``goal`` (relative std;
        ``goal`` 0: never) and whose mass is positive."""
        return (self.estimate.target != "arm" and goal > 0 and self.precision.reached(goal)
                and self.estimate.theta[0] > 0)


def publication(session: OnlineSession, *, inertia_required: bool = False,
                joint_names: tuple[str, ...] | None = None) -> Publication:
    """The session's estimate now, as result and precision (``inertia_required``: a payload's
    inertia about its CoM counts among the required directions)."""
    est = session.snapshot()
    precision = estimate_precision(session.target, est.theta, session.information(),
                                   inertia_required=inertia_required)
    return Publication(est, session.result(est, joint_names=joint_names), precision)
