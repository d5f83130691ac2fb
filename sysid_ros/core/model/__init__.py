"""The robot model: kinematic tree and parameters (``robot``), spatial algebra, kinematics, regressors,
base parameters, physical consistency, motor tables, and the identification target (arm or payload)."""
