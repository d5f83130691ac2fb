"""Model features that couple joints in ways the rigid-body regressor cannot represent.

The identified model is ``τ = Y(q, q̇, q̈) θ`` per joint: the torque a joint's motor applies equals
the rigid-body dynamics of the open chain plus the joint's own friction terms. Tendons (spatial or
fixed: they pull on several joints at once), equality constraints (welds, connects, joint or tendon
couplings) and deformable bodies (flexes) add forces that no column of ``Y`` holds, so a fit on such
a model's data is silently wrong (identification errors of thousands of per cent). They are refused
here, once, for every place a model is loaded.
"""

from __future__ import annotations

import mujoco

from sysid_ros.core.errors import ModelError

_EQUALITY_KINDS = {0: "connect", 1: "weld", 2: "joint", 3: "tendon", 4: "flex"}


def _names(mj: mujoco.MjModel, kind: mujoco.mjtObj, count: int, label: str) -> list[str]:
    return [mujoco.mj_id2name(mj, kind, i) or f"{label} {i}" for i in range(count)]


def check_couplings(mj: mujoco.MjModel, source: str | None = None) -> None:
    """Raise :class:`ModelError` (one line) when ``mj`` has tendons, equality constraints or
    flexes, naming them and saying why."""
    found = []
    if mj.ntendon:
        found.append(f"tendons {_names(mj, mujoco.mjtObj.mjOBJ_TENDON, mj.ntendon, 'tendon')}")
    if mj.neq:
        kinds = [_EQUALITY_KINDS.get(int(k), str(int(k))) for k in mj.eq_type]
        names = _names(mj, mujoco.mjtObj.mjOBJ_EQUALITY, mj.neq, "equality")
        found.append("equality constraints " + str([f"{n} ({k})" for n, k in zip(names, kinds, strict=True)]))
    if getattr(mj, "nflex", 0):
        found.append(f"{mj.nflex} flex(es)")
    if found:
        raise ModelError(f"{source or 'the model'} has {' and '.join(found)}: they couple joints with "
                         "forces the rigid-body regressor cannot represent, so its parameters would "
                         "be identified wrongly; expected an open chain of bodies and joints (remove "
                         "them, or model the coupled joints' torque as measured joint torques)")
