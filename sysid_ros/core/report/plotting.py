"""Matplotlib without a display, and PNG files written atomically (the result files' plots)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["pyplot", "save_figure"]


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (nodes and CI have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, *, dpi: int = 100) -> Path:
    """Lay ``fig`` out, write it to ``path`` through a temporary file (never a half-written PNG
    under the final name), close it; returns the path."""
    plt = pyplot()
    path = Path(path)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    try:
        fig.savefig(tmp, dpi=dpi)
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
