"""``report.html``: one self-contained page about one identification (``sysid report DIR``).

The page embeds everything it shows: the figures' data as JSON and ``plotly.js`` itself (from the
``plotly`` package, read as a file; the Python plotting API is not used), so it opens offline and
makes no network request. Sections, in order (:data:`SECTIONS`): the verdict
(:mod:`~sysid_ros.core.report.verdict`), measured vs predicted torque per joint on the
identification and held-out data (zoomable), residual histograms, the parameter table (value,
std, nominal, whether the data or the prior determined it), per-body mass/CoM/inertia vs
nominal, identifiability (rank, condition, the poorly determined base directions), the
validation suite's checks as PASS/FAIL rows, warnings, provenance.

A standard parameter is *determined by the data* when some base parameter it enters is not
poorly determined (:func:`~sysid_ros.core.model.base_params.poorly_determined`); else the prior
sets it: it enters no base parameter (no effect on the torques) or only poorly determined ones.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.json_numbers import dumps_strict
from sysid_ros.core.report.figures import link_figure, precision_figure, residual_figure, torque_figure
from sysid_ros.core.report.report_data import REPORT_FILE, ReportInputs
from sysid_ros.core.report.verdict import Verdict, base_precision, verdict_of

log = logging.getLogger(__name__)

__all__ = ["SECTIONS", "build_report", "determined_by", "plotly_js", "write_report"]

#: (id, heading) of every section, in page order
SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict"),
    ("torque", "Measured vs predicted torque"),
    ("residuals", "Residual histograms"),
    ("parameters", "Parameters"),
    ("links", "Bodies: mass, CoM and inertia vs nominal"),
    ("identifiability", "Identifiability"),
    ("validation", "Validation suite"),
    ("warnings", "Warnings"),
    ("provenance", "Provenance"),
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:0 16px 40px;color:#222}
h1{font-size:1.5em;margin:18px 0 4px}h2{font-size:1.2em;margin-top:28px;border-bottom:1px solid #ddd}
.sub{color:#666;margin:0 0 8px}
.verdict{font-size:1.25em;font-weight:600;padding:10px 14px;border-radius:6px}
.ok{background:#e6f4ea;color:#135c2a}.caution{background:#fff4e0;color:#7a4b00}
.fail{background:#fde7e7;color:#8a1414}
table{border-collapse:collapse;font-size:.85em;margin:6px 0}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}th{background:#f5f5f5}
td.l,th.l{text-align:left}
tr.pass td.s{color:#135c2a;font-weight:600}tr.failrow td.s{color:#8a1414;font-weight:600}
.scroll{max-height:460px;overflow:auto;display:inline-block}
.note{color:#555}code{font-size:.9em}
"""

_RENDER_JS = """
window.sysidReportReady = Promise.all(Array.prototype.map.call(
  document.querySelectorAll('div.plot'), function (div) {
    var spec = JSON.parse(document.getElementById(div.dataset.spec).textContent);
    return Plotly.newPlot(div, spec.data, spec.layout, {responsive: true, displaylogo: false});
  })).then(function (plots) { document.body.dataset.plots = String(plots.length); return plots.length; });
"""


def plotly_js() -> str:
    """The minified ``plotly.js`` that the ``plotly`` package ships (``package_data``);
    :class:`SysIdError` when the package is not installed."""
    try:
        return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise SysIdError(f"the HTML report needs the plotly package (pip install plotly): {exc}") from None


def determined_by(result: Mapping[str, Any]) -> dict[str, str]:
    """``{standard parameter: "data" | "prior: ..."}`` by the module docstring's rule."""
    base = result.get("base") or {}
    independent = list(base.get("independent") or [])
    regrouping = base.get("regrouping") or {}
    _, _, _, poor = base_precision(result)
    if len(poor) != len(independent):  # no base structure recorded: nothing to say
        return {}
    entered: dict[str, list[int]] = {}
    for i, name in enumerate(independent):
        for member in [name, *(regrouping.get(name) or {})]:
            entered.setdefault(member, []).append(i)
    out = {}
    for name in result.get("parameters") or {}:
        idx = entered.get(name, [])
        if not idx:
            out[name] = "prior: no effect on the torques"
        elif all(poor[i] for i in idx):
            out[name] = "prior: poorly determined"
        else:
            out[name] = "data"
    return out


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _g(x: Any, spec: str = ".5g") -> str:
    if x is None:
        return "–"
    x = float(x)
    return "–" if not np.isfinite(x) else format(x, spec)


class _Page:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.specs: list[tuple[str, dict[str, Any]]] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def plot(self, key: str, spec: dict[str, Any]) -> None:
        fid = f"fig-{key}"
        self.specs.append((fid, spec))
        self.add(f'<div class="plot" id="plot-{_e(key)}" data-spec="{fid}"></div>')

    def section(self, sid: str) -> None:
        self.add(f'<section id="{sid}"><h2>{_e(dict(SECTIONS)[sid])}</h2>')

    def end(self) -> None:
        self.add("</section>")


def build_report(inputs: ReportInputs, *, js: str | None = None) -> str:
    """The page (module docstring) as one string; ``js``: the plotly.js to inline (default
    :func:`plotly_js`)."""
    r = inputs.result
    d = r.get("diagnostics") or {}
    verdict = verdict_of(r, inputs.validation)
    unit = "N·m"
    page = _Page()
    target = r.get("target") or {}
    title = f"sysid report: {r.get('method', '?')} on {Path(str(target.get('model') or '?')).name}"
    page.add(f"<h1>{_e(title)}</h1><p class='sub'>{_e(inputs.result_path)}</p>")

    page.section("verdict")
    _verdict(page, verdict)
    page.end()

    page.section("torque")
    if inputs.series:
        for s in inputs.series:
            page.plot(f"torque-{s.key}", torque_figure(s, inputs.joints, unit=unit))
        page.add("<p class='note'>Drag to zoom (double-click: back); every joint follows the time axis. "
                 "Each line is drawn by its envelope: a run's minimum and maximum sample.</p>")
    else:
        page.add("<p class='note'>No torque series recorded with this result.</p>")
    page.end()

    page.section("residuals")
    if inputs.series:
        page.plot("residuals", residual_figure(inputs.series, inputs.joints, unit=unit))
    else:
        page.add("<p class='note'>No torque series recorded with this result.</p>")
    page.end()

    page.section("parameters")
    _parameters(page, r)
    page.end()

    page.section("links")
    values = {n: float(v["value"]) for n, v in (r.get("parameters") or {}).items()}
    nominal = target.get("prior")
    fig = link_figure(values, nominal) if values else None
    if fig is None:
        page.add("<p class='note'>No body with its 10 inertial parameters in this result.</p>")
    else:
        page.plot("links", fig)
        if not nominal:
            page.add("<p class='note'>No nominal values recorded with this result (older version).</p>")
    page.end()

    page.section("identifiability")
    _identifiability(page, r, d)
    page.end()

    page.section("validation")
    _validation(page, inputs.validation)
    page.end()

    page.section("warnings")
    warnings = [*(d.get("warnings") or []), *inputs.notes,
                *(f.text for f in verdict.findings if f.level != "ok")]
    page.add("<ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>" if warnings
             else "<p class='note'>None.</p>")
    page.end()

    page.section("provenance")
    _provenance(page, r, inputs)
    page.end()

    specs = "".join(f'<script type="application/json" id="{fid}">{_json(spec)}</script>'
                    for fid, spec in page.specs)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{_CSS}</style>"
            "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
            f"<script>{plotly_js() if js is None else js}</script></head><body>"
            + "".join(page.parts) + specs + f"<script>{_RENDER_JS}</script></body></html>\n")


def _json(spec: dict[str, Any]) -> str:
    """JSON safe inside a ``<script>`` element (no ``</`` closes it early)."""
    return dumps_strict(spec, separators=(",", ":")).replace("</", "<\\/")


def _verdict(page: _Page, verdict: Verdict) -> None:
    page.add(f'<p id="verdict-line" class="verdict {verdict.level}">{_e(verdict.headline())}</p><table>'
             "<tr><th class='l'>topic</th><th class='l'>finding</th><th class='l'></th></tr>")
    for f in verdict.findings:
        page.add(f"<tr><td class='l'>{_e(f.topic)}</td><td class='l {f.level}'>{_e(f.level)}</td>"
                 f"<td class='l'>{_e(f.text)}</td></tr>")
    page.add("</table>")


def _parameters(page: _Page, r: Mapping[str, Any]) -> None:
    params = r.get("parameters") or {}
    if not params:
        page.add("<p class='note'>This result exports no standard parameters.</p>")
        return
    nominal = (r.get("target") or {}).get("prior") or {}
    how = determined_by(r)
    page.add("<div class='scroll'><table><tr><th class='l'>parameter</th><th>value</th><th>std</th>"
             "<th>nominal</th><th class='l'>determined by</th></tr>")
    for name, item in params.items():
        page.add(f"<tr><td class='l'>{_e(name)}</td><td>{_g(item.get('value'))}</td>"
                 f"<td>{_g(item.get('std'), '.3g')}</td><td>{_g(nominal.get(name))}</td>"
                 f"<td class='l'>{_e(how.get(name, '–'))}</td></tr>")
    page.add("</table></div>")
    src = (r.get("exported_parameters") or {}).get("from") or r.get("method")
    page.add(f"<p class='note'>Exported standard parameters (from {_e(src)}); units SI (kg, kg·m, "
             "kg·m² about the body origin in the body frame; N·m, N·m·s/rad, kg·m² for joint terms). "
             "A parameter is determined by the data when a base parameter it enters has a standard "
             "deviation below its value.</p>")


def _identifiability(page: _Page, r: Mapping[str, Any], d: Mapping[str, Any]) -> None:
    names, values, std, poor = base_precision(r)
    page.add(f"<p>{len(names)} base parameters, rank {_e(d.get('rank', '–'))} of the regression rows, "
             f"condition number {_g(d.get('condition_number'), '.4g')} (unit-norm columns); "
             f"{int(poor.sum())} poorly determined (standard deviation larger than the value).</p>")
    fig = precision_figure(names, values, std, poor)
    if fig is not None:
        page.plot("precision", fig)
    if poor.any():
        rel = 100 * std / np.maximum(np.abs(values), 1e-300)
        order = np.flatnonzero(poor)[np.argsort(-rel[poor])]
        page.add("<div class='scroll'><table><tr><th class='l'>poorly determined base direction</th>"
                 "<th>value</th><th>std</th><th>relative std [%]</th></tr>")
        for i in order:
            page.add(f"<tr><td class='l'>{_e(names[i])}</td><td>{_g(values[i])}</td>"
                     f"<td>{_g(std[i], '.3g')}</td>"
                     f"<td>{_g(rel[i], '.3g')}</td></tr>")
        page.add("</table></div><p class='note'>These directions of the parameter space were left "
                 "poorly excited; the exported parameters take them from the prior. A richer "
                 "excitation (sysid trajectory --optimize) or fewer joint terms determine them.</p>")


def _validation(page: _Page, validation: Mapping[str, Any] | None) -> None:
    if validation is None:
        page.add("<p class='note'>The validation suite did not run on this result "
                 "(<code>sysid validate --result DIR/result.json --out DIR</code> adds it).</p>")
        return
    page.add("<table><tr><th class='l'>check</th><th class='l'>result</th><th>figure</th><th>limit</th>"
             "<th class='l'>criterion</th></tr>")
    for c in validation.get("checks") or []:
        ok = bool(c.get("passed"))
        unit = c.get("unit", "")
        page.add(f"<tr class='{'pass' if ok else 'failrow'}'><td class='l'>{_e(c.get('name'))}</td>"
                 f"<td class='l s'>{'PASS' if ok else 'FAIL'}</td>"
                 f"<td>{_g(c.get('figure'), '.3g')} {_e(unit)}</td>"
                 f"<td>{_e(c.get('comparison', ''))} {_g(c.get('threshold'), 'g')} {_e(unit)}</td>"
                 f"<td class='l'>{_e(c.get('criterion', ''))}</td></tr>")
    page.add("</table>")


def _provenance(page: _Page, r: Mapping[str, Any], inputs: ReportInputs) -> None:
    from sysid_ros import __version__

    prov = r.get("provenance") or {}
    rows: list[tuple[str, str]] = [
        ("package version", f"sysid_ros {prov.get('version', '(not recorded)')}"),
        ("command line", prov.get("command_line", "(not recorded)")),
        ("created (UTC)", prov.get("created_utc", "(not recorded)")),
        ("result file", str(inputs.result_path)),
    ]
    model = prov.get("model") or {}
    rows.append(("model file", _digest(model) if model else str((r.get("target") or {}).get("model", "–"))))
    for item in prov.get("inputs") or []:
        rows.append(("input", _digest(item)))
    if not prov.get("inputs"):
        rows.append(("input", "(not recorded)"))
    rows.append(("report", f"written by sysid_ros {__version__}"))
    page.add("<table>" + "".join(f"<tr><th class='l'>{_e(k)}</th><td class='l'><code>{_e(v)}</code></td></tr>"
                                 for k, v in rows) + "</table>")


def _digest(item: Mapping[str, Any]) -> str:
    if item.get("missing"):
        return f"{item.get('path')} (not found when the result was written)"
    files = f", {item['files']} files" if "files" in item else ""
    return f"{item.get('path')}  sha256 {item.get('sha256')}  ({item.get('bytes')} bytes{files})"


def write_report(folder: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None,
                 js: str | None = None) -> Path:
    """Build the report of the result folder ``folder`` (:meth:`ReportInputs.load`) and write it
    to ``out`` (default ``folder/report.html``) whole, through a temporary file; returns its path."""
    inputs = ReportInputs.load(folder)
    text = build_report(inputs, js=js)
    path = Path(out) if out is not None else Path(folder) / REPORT_FILE
    return write_atomic(path, text)
