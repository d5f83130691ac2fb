"""The 3-joint test arm (:mod:`oracles.three_link_arm`) with the sigmoid friction that Gaz,
Cognetti, Oliva, Robuffo Giordano and De Luca identified on the Franka Emika Panda's joints 1–3
("Dynamic Identification of the Franka Emika Panda Robot With Retrieval of Feasible Parameters
Using Penalty-Based Optimization", IEEE RA-L 4(4) 2019, friction table):
τ_f = φ1/(1 + exp(−φ2(q̇ + φ3))) − φ1/(1 + exp(−φ2 φ3)), as MJCF custom numerics
``sigmoid:<joint>`` = ``"φ1 φ2 φ3"``, in place of the arm's Coulomb friction (frictionloss 0;
viscous 0.3 N·m·s/rad and rotor inertia 0.01 kg·m² kept)."""

from __future__ import annotations

from oracles.three_link_arm import three_link_arm

#: [φ1 N·m, φ2 s/rad, φ3 rad/s] of the Panda's joints 1–3 (Gaz et al. 2019)
PHI_TRUE: dict[str, tuple[float, float, float]] = {
    "j1": (0.54615, 5.1181, 0.039533), "j2": (0.87224, 9.0657, 0.025882), "j3": (0.64068, 10.136, -0.04607)}

SIGMOID_ARM = three_link_arm("  <custom>\n" + "".join(
    f'    <numeric name="sigmoid:{j}" data="{p1} {p2} {p3}"/>\n' for j, (p1, p2, p3) in PHI_TRUE.items())
    + "  </custom>\n").replace('frictionloss="0.4"', 'frictionloss="0"')
