"""Message <-> core conversions (no mathematics here)."""

from __future__ import annotations

import math

import numpy as np

from sysid_ros.core.result import IdentificationResult


def estimate_message(msg_type, result: IdentificationResult, *, names, values, std=None,
                     target: str = "arm", consistent: bool = False,
                     divergence_to_prior: float = math.nan, divergence_to_truth: float = math.nan,
                     stamp=None):
    """A ``sysid_ros/ParameterEstimate`` from an identification result."""
    d = result.diagnostics
    rms = d.residual_rms[np.isfinite(d.residual_rms)]
    msg = msg_type()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.method = result.method
    msg.target = target
    msg.names = list(names)
    msg.values = [float(v) for v in values]
    msg.std_dev = [float(v) for v in (std if std is not None else [math.nan] * len(msg.values))]
    msg.base_names = list(result.base.names)
    msg.base_values = [float(v) for v in result.beta]
    msg.rank = int(d.rank)
    msg.condition_number = float(d.condition_number)
    msg.residual_rms = float(np.sqrt(np.mean(rms**2))) if rms.size else math.nan
    msg.sample_count = int(d.n_samples)
    msg.physically_consistent = bool(consistent)
    msg.divergence_to_prior = float(divergence_to_prior)
    msg.divergence_to_truth = float(divergence_to_truth)
    return msg
