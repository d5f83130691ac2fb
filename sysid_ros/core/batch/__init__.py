"""Batch identification: least squares (``least_squares``), convex programs with physical consistency
(``convex``), instrumental variables (``iv``) and the engine that runs a method on data (``identify``)."""
