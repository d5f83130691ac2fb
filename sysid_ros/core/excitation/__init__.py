"""Excitation: optimal design of Fourier trajectories (:mod:`sysid_ros.core.data.fourier`) for the
base regressor's condition number (``design``), and a complete run with ramps and feed-forward
(``plan``)."""
