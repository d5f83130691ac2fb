"""MuJoCo simulation under the Damiao MIT law: recorded runs (``simulation``), the stepped plant
(``mit_simulator``) and synthetic identification data with payloads and free-floating bases
(``synthetic``)."""
