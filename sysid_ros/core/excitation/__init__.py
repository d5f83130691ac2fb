"""Excitation: Fourier trajectories (``fourier``), optimal design for the base regressor's condition
number (``design``), and a complete run with ramps and feed-forward (``plan``)."""
