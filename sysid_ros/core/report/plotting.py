"""Matplotlib without a display, and PNG files written atomically (the result files' plots)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sysid_ros.core.atomic import atomic_path

__all__ = ["envelope", "pyplot", "save_figure"]

#: points drawn per line: a min and a max per bin, ~2 per pixel column of a 10 in figure at 90 dpi
ENVELOPE_BINS = 1000


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (nodes and CI have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, *, dpi: int = 100, tight: bool = True) -> Path:
    """Lay ``fig`` out (``tight``: matplotlib's tight layout, which draws the figure once more;
    else as the caller placed the axes), write it to ``path`` through a temporary file (never a
    half-written PNG under the final name), close it; returns the path."""
    plt = pyplot()
    path = Path(path)
    if tight:
        fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)
    return path


def envelope(t: np.ndarray, y: np.ndarray, bins: int = ENVELOPE_BINS) -> tuple[np.ndarray, np.ndarray]:
    """What a line plot of ``y (N,)`` over ``t (N,)`` shows, in at most ``2·bins`` points: ``t``
    cut into ``bins`` runs of consecutive samples, each run drawn by its smallest and its largest
    sample, in time order. Every sample's value lies within the drawn line's range over its run, and
    every run's extremes are drawn; a series of at most ``2·bins`` samples comes back as it is.
    Returns ``(t_drawn, y_drawn)``, both ``(M,)``."""
    t, y = np.asarray(t), np.asarray(y)
    n = len(y)
    if n <= 2 * bins or not np.all(np.isfinite(y)):  # NaN: drawn as gaps, as recorded
        return t, y
    edges = np.linspace(0, n, bins + 1).astype(int)
    starts = edges[:-1]
    lo = np.minimum.reduceat(y, starts)
    hi = np.maximum.reduceat(y, starts)
    # first index of each run's minimum / maximum
    keys = np.repeat(np.arange(bins), np.diff(edges))
    first_lo = np.full(bins, n)
    first_hi = np.full(bins, n)
    idx = np.arange(n)
    np.minimum.at(first_lo, keys[y == lo[keys]], idx[y == lo[keys]])
    np.minimum.at(first_hi, keys[y == hi[keys]], idx[y == hi[keys]])
    keep = np.unique(np.concatenate([first_lo, first_hi]))
    return t[keep], y[keep]
