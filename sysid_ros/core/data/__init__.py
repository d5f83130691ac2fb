"""Measured data: ``dataset`` (validated samples, CSV), ``bag`` (rosbag2 read/write),
``preprocessing`` (filtering, differentiation, decimation), ``trajectory_file`` (replayable MIT
trajectories), ``fourier`` (finite Fourier series trajectories with exact derivatives)."""
