"""Estimators: batch (least squares and its constrained/weighted variants) and recursive."""

from .least_squares import ols, regression_rows, wls

__all__ = ["ols", "regression_rows", "wls"]
