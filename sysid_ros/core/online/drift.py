"""Random-walk model of parameter drift, shared by the EKF and the MHE (overview seed: process
noise on π modelling drift, e.g. friction with temperature, or a payload picked up).

Parameters have different units (kg, kg·m, kg·m², N·m, N·m·s/rad), so drift is stated relative to
a scale per parameter: ``dπ = drift · s ⊙ dw`` with ``w`` a standard Wiener process, i.e. over
``h`` seconds a parameter moves by ``drift · s_i · √h`` (one standard deviation). The same scale,
times :data:`INITIAL_STD`, is the prior's standard deviation.
"""

from __future__ import annotations

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.model.target import Target

#: prior standard deviation of every parameter, in units of its scale (:func:`parameter_scale`)
INITIAL_STD = 1.0
#: smallest mass [kg] used to scale a body's parameters (a massless prior still has a size)
MIN_MASS = 0.1
#: smallest length [m] used to scale a body's first and second moments
MIN_LENGTH = 0.05
#: smallest scale of friction terms [N·m, N·m·s/rad] and of rotor inertia [kg·m²]
MIN_FRICTION, MIN_ARMATURE = 0.1, 0.01


def parameter_scale(target: Target) -> np.ndarray:
    """``s (p,)``: the size of each of ``target``'s parameters, from its prior.

    A body with prior mass ``m`` and radius of gyration ``L = √(tr I_O / (2m))`` about its origin
    has scales ``m`` (mass), ``m·L`` (first moments), ``m·L²`` (inertias); ``m`` is at least
    :data:`MIN_MASS` and ``L`` at least :data:`MIN_LENGTH`. Joint terms: ``max(|prior|, floor)``.
    """
    prior = np.asarray(target.prior, dtype=float)
    scale = np.maximum(np.abs(prior), MIN_FRICTION)
    for i, name in enumerate(target.names):
        if name.endswith(".Ia"):
            scale[i] = max(abs(prior[i]), MIN_ARMATURE)
    for _label, sl in target.body_blocks:
        phi = prior[sl]
        mass = max(float(phi[0]), MIN_MASS)
        length = max(float(np.sqrt(max(phi[4] + phi[7] + phi[9], 0.0) / (2.0 * mass))), MIN_LENGTH)
        scale[sl] = [mass, *[mass * length] * 3, *[mass * length**2] * 6]
    return scale


def base_scale(target: Target) -> np.ndarray:
    """``s_β (r,)``: the scale of each base parameter ``β = B θ``: ``√(B² s²)`` (independent
    standard parameters of scale ``s``)."""
    b = target.base.matrix
    return np.sqrt((b**2) @ parameter_scale(target) ** 2)


def base_to_standard(target: Target) -> np.ndarray:
    """``G (p, r)``: ``θ = θ₀ + G (β − B θ₀)`` is the standard vector closest to the prior
    ``θ₀`` (in the scaled metric) with base parameters ``β`` (``B G = I``)."""
    b, s = target.base.matrix, parameter_scale(target)
    bs = b * s  # B diag(s)
    return s[:, None] * rla.pinv(bs)
