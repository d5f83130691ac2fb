"""Options of the batch identification (:class:`IdentifyOptions`) and the methods' names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from sysid_ros.core.errors import DataError

if TYPE_CHECKING:  # (both load compiled kernels: imported where used, so that a node reads the
    # method names without them)
    from sysid_ros.core.data.preprocessing import Preprocessing

Method = Literal["ols", "wls", "pc_ls", "energy", "wls_logdet", "wls_pullback", "dual_metric", "iv",
                 "pc_iv"]
METHODS: tuple[str, ...] = get_args(Method)
#: methods that simulate the recorded closed loop: only they read a bag's MotorCommand topic
COMMAND_METHODS: tuple[str, ...] = ("iv", "pc_iv")
#: default regularisation weight of wls_logdet / wls_pullback: the prior counts as this many rows
#: of the data's own noise (the weight was 1e-3 of the normalised fit, which on a real-like 1 kHz log
#: is hundreds of rows: held-out torque error 2.3x pc_ls's, issue 22) ...
PRIOR_ROWS = 100.0
#: ... and at least this (of the normalised fit): on noise-free data the rows' 1/σ_j weights make
#: PRIOR_ROWS rows vanish and the conic solver stops inaccurate
MIN_PRIOR_WEIGHT = 1e-6


@dataclass(frozen=True)
class IdentifyOptions:
    """Options of :func:`identify`.

    ``min_speed`` [rad/s]: rows of joints slower than this are dropped when a Coulomb term is
    identified; ``regularization``: λ of the regularised methods (<= 0: default);
    ``max_samples``: samples kept for the dual-metric SDP (evenly spread); ``iv_*``: iteration
    cap and convergence tolerance of eq. 46; ``progress``: called with one-line messages.
    """

    method: Method = "ols"
    preprocessing: Preprocessing = field(default_factory=lambda: _default_preprocessing())
    min_speed: float = 0.05
    regularization: float = 0.0
    max_samples: int = 2000
    iv_max_iter: int = 10
    iv_tol: float = 1e-4
    progress: Callable[[str], None] | None = None
    #: [rad/s] Stribeck velocity q̇s of the ``Fs`` terms; None: found by a 1-D search (:func:`settle_stribeck`)
    stribeck_velocity: float | None = None
    #: (φ2 [s/rad], φ3 [rad/s]) of every joint's sigmoid friction ``Fsig``; None: found by a
    #: search per joint (:func:`settle_sigmoid`)
    sigmoid_shape: tuple[float, float] | None = None
    #: leave out the rows :mod:`~sysid_ros.core.batch.outliers` flags (they are reported either way)
    drop_outliers: bool = False

    def __post_init__(self) -> None:
        if not self.max_samples >= MIN_SDP_SAMPLES:
            raise DataError(f"max_samples must be >= {MIN_SDP_SAMPLES}, got {self.max_samples}")
        if not np.isfinite(self.regularization):
            raise DataError(f"regularization must be a finite number (<= 0: the default), got "
                            f"{self.regularization}")
        if not (np.isfinite(self.min_speed) and self.min_speed >= 0):
            raise DataError(f"min_speed must be a finite number >= 0 rad/s, got {self.min_speed}")
        from sysid_ros.core.batch.friction_shape import check_sigmoid_option, check_stribeck_velocity

        check_stribeck_velocity(self.stribeck_velocity)
        check_sigmoid_option(self.sigmoid_shape)


def _default_preprocessing() -> Preprocessing:
    from sysid_ros.core.data.preprocessing import Preprocessing

    return Preprocessing()


#: fewest samples :class:`IdentifyOptions` lets the dual-metric SDP keep (the batch_solver's bound)
MIN_SDP_SAMPLES = 10

