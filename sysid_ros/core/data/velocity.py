"""Measured joint velocities, joint by joint.

A recording's velocity column may be missing for some joints only (all NaN: a drive that does not
report it), or hold a few NaN samples (a dropped field). The rule, in one place: a joint whose
velocity column is finite throughout uses it (filtered, :func:`~sysid_ros.core.data.preprocessing.condition`);
any other joint's velocity is differentiated from its positions, and that joint is named in one
warning. Before this rule one NaN anywhere switched every joint to differentiated positions,
silently.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sysid_ros.core.data.dataset import Dataset


def measured_joints(dq: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the joints whose velocity column ``dq (N, n)`` is finite throughout."""
    return np.all(np.isfinite(dq), axis=0)


def per_joint_velocity(ds: Dataset) -> tuple[Dataset, list[str]]:
    """``ds`` with the velocity column of every joint that is not finite throughout set to NaN
    (its velocity is then differentiated from its positions), and one warning line naming those
    joints, when some joints do have measured velocities (a recording without any is the normal
    position-only case: no warning)."""
    finite = np.isfinite(ds.dq)
    measured = finite.all(axis=0)
    if measured.all() or not finite.any():
        return ds, []
    parts = []
    for j in np.flatnonzero(~measured):
        bad = int((~finite[:, j]).sum())
        what = "all NaN" if bad == len(ds.t) else f"{bad} NaN of {len(ds.t)} samples"
        parts.append(f"{ds.joint_names[j]} ({what})")
    dq = ds.dq.copy()
    dq[:, ~measured] = np.nan
    line = (f"{ds.source}: measured velocity used for {int(measured.sum())} of {len(measured)} joints; "
            f"differentiated from positions for {', '.join(parts)}")
    return replace(ds, dq=dq), [line]
