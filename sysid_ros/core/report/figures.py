"""The report's interactive figures as plotly figure specifications (plain dicts: ``{"data":
[...], "layout": {...}}``, JSON-ready), built with numpy only; ``plotly.js`` draws them in the
page (:mod:`~sysid_ros.core.report.html`).

* :func:`torque_figure` — measured vs predicted torque, one stacked axis per joint sharing the
  time axis (zoom one, all follow); each line drawn by its envelope
  (:func:`~sysid_ros.core.report.plotting.envelope`, at most ``2·TRACE_BINS`` points);
* :func:`residual_figure` — histograms of ``measured − predicted`` per joint, every data set;
* :func:`link_figure` — per body, identified vs nominal mass, CoM distance from the nominal CoM
  and principal moments at the CoM;
* :func:`precision_figure` — relative standard deviation of every base parameter (log scale),
  the poorly determined ones in red.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sysid_ros.core.json_numbers import rounded_json_numbers
from sysid_ros.core.model.ellipsoid import body_ellipsoids
from sysid_ros.core.report.plotting import envelope
from sysid_ros.core.report.report_data import TorqueSeries

__all__ = ["TRACE_BINS", "link_figure", "precision_figure", "residual_figure", "torque_figure"]

#: envelope bins of a drawn torque line (two points each: a run's minimum and maximum)
TRACE_BINS = 1500
#: bins of a residual histogram
HISTOGRAM_BINS = 40
#: plotly's default palette, first colours: measured/identified, predicted/nominal
_BLUE, _ORANGE, _GREEN, _RED, _GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f"


def _list(a: np.ndarray, digits: int = 6) -> list[float | None]:
    """Finite values rounded to ``digits`` significant digits (JSON size), NaN/inf as ``None``."""
    return rounded_json_numbers(a, digits)


def _stacked(n: int, gap: float = 0.03) -> list[list[float]]:
    """``n`` vertical axis domains, top first."""
    h = (1.0 - gap * (n - 1)) / n
    return [[max(0.0, 1.0 - (k + 1) * h - k * gap), 1.0 - k * (h + gap)] for k in range(n)]


def torque_figure(series: TorqueSeries, joints: Sequence[str], *, unit: str = "N·m") -> dict[str, Any]:
    """Measured vs predicted torque of one data set, a stacked axis per joint."""
    n = len(joints)
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {
        "height": 150 * n + 90, "margin": {"l": 70, "r": 20, "t": 40, "b": 45},
        "title": {"text": f"{series.title}: measured vs predicted", "font": {"size": 14}},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
        "hovermode": "x unified",
        "xaxis": {"title": {"text": "time [s]"}, "anchor": f"y{n if n > 1 else ''}"},
    }
    for j, (name, dom) in enumerate(zip(joints, _stacked(n), strict=True)):
        axis = "" if j == 0 else str(j + 1)
        for label, values, color, dash in (("measured", series.measured, _BLUE, "solid"),
                                           ("predicted", series.predicted, _ORANGE, "dash")):
            t, y = envelope(series.t, values[:, j], bins=TRACE_BINS)
            data.append({"type": "scatter", "mode": "lines", "name": label, "legendgroup": label,
                         "showlegend": j == 0, "x": _list(t), "y": _list(y),
                         "xaxis": "x", "yaxis": f"y{axis}",
                         "line": {"color": color, "width": 1, "dash": dash},
                         "hovertemplate": f"{name} {label} %{{y:.4g}} {unit}<extra></extra>"})
        layout[f"yaxis{axis}"] = {"domain": dom,
                                  "title": {"text": f"{name}<br>[{unit}]", "font": {"size": 11}},
                                  "anchor": "x", "zeroline": False}
    return {"data": data, "layout": layout}


def residual_figure(series: Sequence[TorqueSeries], joints: Sequence[str], *, unit: str = "N·m",
                    columns: int = 4) -> dict[str, Any]:
    """Histograms of ``measured − predicted`` per joint (one panel each), each data set a colour;
    counts normalised to probability density so the data sets compare."""
    n = len(joints)
    cols = min(columns, n)
    rows = math.ceil(n / cols)
    gap_x, gap_y = 0.06, 0.12
    w, h = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"height": 230 * rows + 80, "barmode": "overlay", "bargap": 0.0,
                              "margin": {"l": 55, "r": 20, "t": 40, "b": 40},
                              "title": {"text": "residuals: measured − predicted", "font": {"size": 14}},
                              "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02,
                                         "yanchor": "bottom"}}
    colors = {"fit": _BLUE, "validation": _GREEN}
    for j, name in enumerate(joints):
        r, c = divmod(j, cols)
        axis = "" if j == 0 else str(j + 1)
        x0 = c * (w + gap_x)
        y1 = 1 - r * (h + gap_y)
        layout[f"xaxis{axis}"] = {"domain": [x0, x0 + w], "anchor": f"y{axis}",
                                  "title": {"text": f"{name} [{unit}]", "font": {"size": 11}}}
        layout[f"yaxis{axis}"] = {"domain": [max(0.0, y1 - h), y1], "anchor": f"x{axis}"}
        for s in series:
            res = s.residual[:, j]
            res = res[np.isfinite(res)]
            if res.size == 0:
                continue
            counts, edges = np.histogram(res, bins=HISTOGRAM_BINS, density=True)
            rms = float(np.sqrt(np.mean(res**2)))
            data.append({"type": "bar", "name": s.title, "legendgroup": s.key, "showlegend": j == 0,
                         "x": _list(0.5 * (edges[1:] + edges[:-1])), "y": _list(counts),
                         "width": float(edges[1] - edges[0]), "opacity": 0.6,
                         "marker": {"color": colors.get(s.key, _GREY)},
                         "xaxis": f"x{axis}", "yaxis": f"y{axis}",
                         "hovertemplate": f"{s.title}, RMS {rms:.3g} {unit}<br>%{{x:.3g}}: density %{{y:.3g}}"
                                          "<extra></extra>"})
    return {"data": data, "layout": layout}


def link_figure(parameters: Mapping[str, float], nominal: Mapping[str, float] | None
                ) -> dict[str, Any] | None:
    """Per body: mass [kg], CoM distance from the nominal CoM [mm] and principal moments at the
    CoM [kg·m²] (identified beside nominal); ``None`` when no body has its 10 parameters."""
    names = list(parameters)
    ident = [e for e in body_ellipsoids(names, parameters) if e.valid]
    if not ident:
        return None
    nom = {}
    if nominal:
        nom = {e.name: e for e in body_ellipsoids(list(nominal), nominal) if e.valid}
    bodies = [e.name for e in ident]
    shift = [1000 * float(np.linalg.norm(e.com - nom[e.name].com)) if e.name in nom else None for e in ident]
    data: list[dict[str, Any]] = [
        {"type": "bar", "name": "identified", "legendgroup": "identified", "x": bodies,
         "y": [e.mass for e in ident], "marker": {"color": _BLUE}, "xaxis": "x", "yaxis": "y"},
        {"type": "bar", "name": "CoM shift", "showlegend": False, "x": bodies, "y": shift,
         "marker": {"color": _GREEN}, "xaxis": "x2", "yaxis": "y2",
         "hovertemplate": "%{x}: CoM %{y:.3g} mm from the nominal CoM<extra></extra>"},
    ]
    if nom:
        data.insert(1, {"type": "bar", "name": "nominal", "legendgroup": "nominal", "x": bodies,
                        "y": [nom[b].mass if b in nom else None for b in bodies],
                        "marker": {"color": _ORANGE}, "xaxis": "x", "yaxis": "y"})
    for k in range(3):
        data.append({"type": "bar", "name": "identified", "legendgroup": "identified", "showlegend": False,
                     "x": [f"{b} I{k + 1}" for b in bodies], "y": [float(e.moments[k]) for e in ident],
                     "marker": {"color": _BLUE}, "xaxis": "x3", "yaxis": "y3", "offsetgroup": "identified"})
        if nom:
            data.append({"type": "bar", "name": "nominal", "legendgroup": "nominal", "showlegend": False,
                         "x": [f"{b} I{k + 1}" for b in bodies],
                         "y": [float(nom[b].moments[k]) if b in nom else None for b in bodies],
                         "marker": {"color": _ORANGE}, "xaxis": "x3", "yaxis": "y3",
                         "offsetgroup": "nominal"})
    doms = _stacked(3, gap=0.12)
    layout = {
        "height": 720, "barmode": "group", "margin": {"l": 70, "r": 20, "t": 40, "b": 80},
        "title": {"text": "per body: identified vs nominal", "font": {"size": 14}},
        "xaxis": {"anchor": "y"}, "xaxis2": {"anchor": "y2"},
        "xaxis3": {"anchor": "y3", "categoryorder": "category ascending", "tickangle": -45},
        "yaxis": {"domain": doms[0], "title": {"text": "mass [kg]"}},
        "yaxis2": {"domain": doms[1], "title": {"text": "CoM shift [mm]"}},
        "yaxis3": {"domain": doms[2], "title": {"text": "principal moment<br>at CoM [kg·m²]"},
                   "type": "log"},
    }
    return {"data": data, "layout": layout}


def precision_figure(names: Sequence[str], values: np.ndarray, std: np.ndarray, poor: np.ndarray
                     ) -> dict[str, Any] | None:
    """Relative std ``100 σ/|β|`` [%] per base parameter (bars, log scale; poorly determined in
    red, hover: the parameter's expression); ``None`` without any finite std."""
    rel = 100 * std / np.maximum(np.abs(values), 1e-300)
    if not np.isfinite(rel).any():
        return None
    labels = [f"β{i + 1}" for i in range(len(names))]
    data = [{"type": "bar", "x": labels, "y": _list(rel, 4), "text": [str(n) for n in names],
             "marker": {"color": [_RED if p else _BLUE for p in poor]},
             "hovertemplate": "%{x}: %{text}<br>relative std %{y:.3g} %<extra></extra>"}]
    layout = {"height": 320, "margin": {"l": 70, "r": 20, "t": 40, "b": 50},
              "title": {"text": "base parameters: relative standard deviation (red: larger than the value)",
                        "font": {"size": 14}},
              "yaxis": {"type": "log", "title": {"text": "σ / |β| [%]"}},
              "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 100, "y1": 100,
                          "line": {"color": _GREY, "dash": "dash", "width": 1}}]}
    return {"data": data, "layout": layout}
