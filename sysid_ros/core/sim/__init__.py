"""MuJoCo simulation under the Damiao MIT law: the one plant every simulation steps (``plant``:
MuJoCo options, the law, torque saturation, sensor model, delays), recorded runs
(``simulation``), the stepped simulator of the ``mujoco_sim`` node (``mit_simulator``) and
synthetic identification data with payloads and free-floating bases (``synthetic``)."""
