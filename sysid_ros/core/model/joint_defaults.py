"""Which joint terms an arm identification uses by default: the ones the model declares.

A model file that gives its joints damping, armature or frictionloss (MJCF ``<joint damping=..
armature=.. frictionloss=..>``, URDF ``<dynamics damping=.. friction=..>``) or the package's
``stribeck:<joint>`` / ``sigmoid:<joint>`` numerics states what its user knows about the joints.
The rule, in one place (``sysid identify``'s ``--friction``/``--armature`` defaults):

* a friction option left unset (``None`` or ``"model"``) identifies the friction terms the model
  declares (``Fc`` for frictionloss, ``Fv`` for damping, ``Fs``/``Fsig`` for the numerics);
  ``"none"`` identifies none; a comma list those named;
* an armature option left unset (``None``) identifies rotor inertia ``Ia`` when the model declares
  armature; ``True``/``False`` force it on or off;
* a declared term left out by an explicit option is not identified, and the exported model says
  so (:func:`excluded_terms` names them: ``identified.xml`` writes them as 0 with a comment, the
  summary prints one line).

Identifying the declared terms, rather than holding them at the file's values, is the default
because a recording rich enough to identify the links also pins joint friction and rotor inertia
(they enter the torque linearly, ``Fv·q̇``, ``Ia·q̈``); the file's values remain the prior that
the regularised methods and the plausible export lean on.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco

from sysid_ros.core.model.robot import JointTerm, joint_terms, sigmoid_numerics, stribeck_numerics

#: MJCF joint attribute -> the joint term it holds
TERM_OF_ATTRIBUTE: dict[str, JointTerm] = {"frictionloss": "Fc", "damping": "Fv", "armature": "Ia"}
#: joint term -> the words a user reads (and ``--friction`` takes)
TERM_WORDS: dict[str, str] = {"Fc": "coulomb (frictionloss)", "Fv": "viscous (damping)",
                              "Fo": "offset", "Ia": "armature", "Fs": "stribeck", "Fsig": "sigmoid"}

_SCALAR = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def declared_terms(mj: mujoco.MjModel) -> dict[JointTerm, tuple[str, ...]]:
    """``{term: joints}``: the joint terms a compiled model holds with a nonzero value on at least
    one hinge/slide joint, with those joints' names (model order)."""
    out: dict[JointTerm, list[str]] = {}
    fields = {"Fc": mj.dof_frictionloss, "Fv": mj.dof_damping, "Ia": mj.dof_armature}
    numerics = {"Fs": {dof: v[0] for dof, v in stribeck_numerics(mj).items()},
                "Fsig": {dof: v[0] for dof, v in sigmoid_numerics(mj).items()}}
    for dof in range(mj.nv):
        j = int(mj.dof_jntid[dof])
        if int(mj.jnt_type[j]) not in _SCALAR:
            continue
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
        for term, values in fields.items():
            if float(values[dof]) != 0.0:
                out.setdefault(term, []).append(name)
        for term, values in numerics.items():
            if float(values.get(dof, 0.0)) != 0.0:
                out.setdefault(term, []).append(name)
    order = ("Fc", "Fv", "Fo", "Ia", "Fs", "Fsig")
    return {t: tuple(out[t]) for t in order if t in out}


def default_joint_terms(mj: mujoco.MjModel, friction: str | Sequence[str] | None = None,
                        armature: bool | None = None) -> tuple[JointTerm, ...]:
    """The joint terms to identify (see the module's rule): ``friction`` None/``"model"`` the
    declared friction terms, ``"none"`` none, else a comma list of coulomb, viscous, offset,
    stribeck, sigmoid; ``armature`` None: ``Ia`` when declared."""
    declared = declared_terms(mj)
    if friction is None or (isinstance(friction, str) and friction.strip() in ("", "model")):
        chosen = [t for t in declared if t != "Ia"]
    elif isinstance(friction, str) and friction.strip() == "none":
        chosen = []
    else:
        chosen = list(joint_terms(friction, False))
    if armature is None:
        armature = "Ia" in declared
    if armature:
        chosen.append("Ia")
    return tuple(dict.fromkeys(chosen))


def excluded_terms(mj: mujoco.MjModel, terms: Sequence[str]) -> dict[JointTerm, tuple[str, ...]]:
    """``{term: joints}`` the model declares that ``terms`` leave out (not identified)."""
    return {t: joints for t, joints in declared_terms(mj).items() if t not in terms}


def excluded_line(mj: mujoco.MjModel, terms: Sequence[str]) -> str | None:
    """One line naming the declared joint terms left out of ``terms`` (None when there are
    none): what the exported model writes as 0."""
    left = excluded_terms(mj, terms)
    if not left:
        return None
    parts = [f"{TERM_WORDS[t]} of {', '.join(j)}" for t, j in left.items()]
    return ("joint terms the model declares but this run does not identify, written as 0 in "
            "identified.xml: " + "; ".join(parts) + " (identify them: leave --friction/--armature "
            "unset, or name them)")
