"""Every PNG the package writes has a legend for what it draws and keeps its text inside the figure.

Each figure is caught as it is saved (a spy around matplotlib's ``Figure.savefig`` that inspects the
laid-out figure, then saves it as usual) while the real writers run: ``sysid identify`` replaying
the shipped vendor log online (torque_fit.png, convergence.png), the validation report's
three plots and the demo's payload plots, on arrays shaped like theirs. Checked per figure:

- every text (tick labels, axis labels, titles, legends) lies inside the figure (1 px slack):
  nothing cut at an edge, e.g. rotated parameter names under a bar chart;
- every labelled line or bar appears in a legend of the figure, and an axes drawing two or more
  data lines has a legend somewhere in the figure (the first panel's legend serves a column of
  panels drawing the same series);
- a legend inside an axes hides at most :data:`HIDDEN` of any line's points.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from sysid_ros.cli.main import main
from sysid_ros.core.atomic import final_path
from sysid_ros.core.report import payload as payload_plots
from sysid_ros.core.report import validation
from sysid_ros.core.report.metrics import TorqueFit
from sysid_ros.core.report.validation_types import CheckResult
from sysid_ros.core.sim.tracking import TrackingRun
from sysid_ros.core.torque_errors import torque_errors

ROOT = Path(__file__).resolve().parents[3]
#: most of one line's points a legend drawn inside an axes may cover
HIDDEN = 0.02
SLACK = 1.0  # px


def _data_lines(ax) -> list:
    return [ln for ln in ax.lines if ln.get_visible() and len(np.atleast_1d(ln.get_xdata())) > 2]


def layout_problems(fig: Figure) -> list[str]:
    """What is wrong with the laid-out ``fig`` (empty when nothing is)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    in_legends = {t.get_text() for leg in legends for t in leg.get_texts()}
    for i, ax in enumerate(fig.axes):
        name = ax.get_title() or ax.get_ylabel() or f"axes {i}"
        tight = ax.get_tightbbox(renderer)
        if tight is not None and (tight.x0 < box.x0 - SLACK or tight.y0 < box.y0 - SLACK
                                  or tight.x1 > box.x1 + SLACK or tight.y1 > box.y1 + SLACK):
            problems.append(f"{name!r}: text outside the figure ({tight.bounds} vs {box.bounds})")
        _, labels = ax.get_legend_handles_labels()
        missing = [lab for lab in labels if lab not in in_legends]
        if missing:
            problems.append(f"{name!r}: labelled but in no legend: {missing}")
        if len(_data_lines(ax)) >= 2 and not legends:
            problems.append(f"{name!r}: {len(_data_lines(ax))} lines and no legend in the figure")
        leg = ax.get_legend()
        if leg is None:
            continue
        lb = leg.get_window_extent(renderer)
        for line in _data_lines(ax):
            xy = line.get_transform().transform(np.column_stack((line.get_xdata(), line.get_ydata())))
            xy = xy[np.all(np.isfinite(xy), axis=1)]
            inside_axes = ax.bbox.contains_points(xy) if hasattr(ax.bbox, "contains_points") else None
            xy = xy[inside_axes] if inside_axes is not None else xy
            if not len(xy):
                continue
            under = (xy[:, 0] > lb.x0) & (xy[:, 0] < lb.x1) & (xy[:, 1] > lb.y0) & (xy[:, 1] < lb.y1)
            hidden = np.mean(under)
            if hidden > HIDDEN:
                problems.append(f"{name!r}: the legend hides {100 * hidden:.0f} % of "
                                f"{line.get_label()!r}")
    return problems


@pytest.fixture
def saved(monkeypatch):
    """{file name: layout problems} of every figure saved while the test runs."""
    seen: dict[str, list[str]] = {}
    original = Figure.savefig

    def spy(self, fname, *args, **kwargs):
        name = final_path(os.fspath(fname)).name  # written whole through a temporary file
        seen[name] = layout_problems(self)
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return seen


def _assert_clean(saved: dict[str, list[str]], expected: set[str]) -> None:
    caught = set(saved)
    assert expected <= caught, f"figures not written: {sorted(expected - caught)} (caught {sorted(caught)})"
    bad = {name: p for name, p in saved.items() if p}
    assert not bad, "\n".join(f"{name}: {line}" for name, p in bad.items() for line in p)


@pytest.mark.slow
def test_identify_and_replay_figures(saved, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    common = ["identify", str(ROOT / "examples" / "ur5e_rtde_log.csv"),
              "--model", str(ROOT / "test" / "robots" / "ur5e.xml"),
              "--columns", "time=timestamp,q=actual_q_{i},dq=actual_qd_{i},tau=actual_current_{i}",
              "--torque-scale", "10", "--friction", "coulomb,viscous", "--accept-cost"]
    # an online replay writes both: the fit of its final estimate and the convergence
    assert main([*common, "--method", "rls_logdet", "--out", "online"]) == 0
    _assert_clean(saved, {"torque_fit.png", "convergence.png"})


def _fit(n: int, seconds: float = 5.0, rate: float = 200.0) -> TorqueFit:
    t = np.arange(0, seconds, 1 / rate)
    measured = np.column_stack([(3 + j) * np.sin(2 * np.pi * (0.3 + 0.1 * j) * t) for j in range(n)])
    predicted = measured + 0.05 * np.cos(7 * t)[:, None]
    return TorqueFit(t, measured, predicted, torque_errors(measured, predicted))


@pytest.mark.slow
def test_validation_figures(saved, tmp_path):
    """The three plots of ``sysid validate`` on arrays shaped like a 7-joint arm's checks, with long
    parameter names under the bars (a full validation takes a minute)."""
    n, t = 7, np.linspace(0, 10, 1000)
    joints = [f"panda_joint{j + 1}" for j in range(n)]
    q_ref = np.column_stack([0.5 * np.sin((0.2 + 0.05 * j) * 2 * np.pi * t) for j in range(n)])
    runs = {key: TrackingRun(t, q_ref, q_ref + scale * np.sin(3 * t)[:, None], np.zeros_like(q_ref), 0)
            for key, scale in (("identified", 0.002), ("nominal", 0.02), ("pd", 0.2))}
    names = [f"{j}.{p}" for j in joints
             for p in ("m", "mx", "my", "mz", "Ixx", "Iyy", "Izz", "Fc", "Fv", "armature")]
    names += ["panda_link7_with_a_very_long_payload_body_name.mz"]
    scored = np.arange(len(names)) % 2 == 0
    rng = np.random.default_rng(0)
    checks = [
        CheckResult("computed_torque_tracking", 80.0, 40.0, "%", False, True, "tracking",
                    series={k: runs[k] for k in ("identified", "nominal")}),
        CheckResult("feedforward_vs_pd", 90.0, 40.0, "%", False, True, "pd", series={"pd": runs["pd"]}),
        CheckResult("torque_prediction", 0.2, 3.0, "%", True, True, "held-out",
                    series={"fit": _fit(n), "joints": joints}),
        CheckResult("payload_generalisation", 0.4, 5.0, "%", True, True, "payload",
                    series={"fit": _fit(n), "joints": joints}),
        CheckResult("parameter_recovery", 4.0, 15.0, "%", True, True, "recovery",
                    series={"names": names, "scored": scored, "relative": rng.uniform(0, 20, len(names))}),
        CheckResult("repeatability", 1.0, 10.0, "%", True, True, "spread",
                    series={"names": names, "scored": scored, "spread": rng.uniform(0, 12, len(names))}),
    ]
    by_name = {c.name: c for c in checks}
    # the report's three writers (write_report calls them the same way after validation.json)
    for writer in (validation._plot_tracking, validation._plot_torque, validation._plot_parameters):
        assert writer(tmp_path, by_name) is not None
    _assert_clean(saved, {"tracking.png", "torque_prediction.png", "parameters.png"})


@pytest.mark.slow
def test_demo_payload_figures(saved, tmp_path):
    """The demo's convergence.png (mass, CoM with dashed truths, divergence) and heldout.png."""
    truth = np.array([0.6, 0.006, -0.009, 0.027, 2e-3, 2e-3, 1e-3, 0, 0, 0])
    k = 400
    times = np.linspace(0, 20, k)
    approach = (1 - np.exp(-times / 3))[:, None]
    estimates = truth[None, :] * (0.3 + 0.7 * approach) + 1e-3 * np.sin(times)[:, None]
    payload_plots.plot_convergence(tmp_path / "convergence.png", times, estimates, truth,
                                   divergence=np.exp(-times / 4))
    t = np.linspace(0, 5, 500)
    measured = np.column_stack([(4 - j / 2) * np.sin((1 + j / 3) * t) for j in range(6)])
    predicted = {m: measured * (1 + 0.01 * i) for i, m in enumerate(("dual_metric", "pc_iv", "nominal"))}
    payload_plots.plot_heldout(tmp_path / "heldout.png", t, measured, predicted,
                               [f"joint{j + 1}" for j in range(6)])
    _assert_clean(saved, {"convergence.png", "heldout.png"})


def test_the_check_sees_a_cut_label_a_missing_legend_and_a_legend_over_the_data():
    """The inspection above can fail: a bar chart whose rotated names run off the bottom, dashed
    truth lines nobody labelled, and a legend on top of the lines it names."""
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    bars, lines = fig.subplots(2, 1)
    bars.bar(range(3), [1, 2, 3])
    bars.set_xticks(range(3), ["a_very_long_parameter_name_that_runs_off_the_page." * 2] * 3, rotation=60)
    t = np.linspace(0, 1, 200)
    lines.plot(t, 0.9 + 0.0 * t, label="estimate")
    lines.plot(t, 0.8 + 0.0 * t, ls="--")
    lines.set_ylim(0, 1)
    lines.legend(loc="upper right")
    text = "\n".join(layout_problems(fig))
    assert "text outside the figure" in text
    assert "the legend hides" in text
    bars.plot(t, t, label="truth")
    bars.plot(t, 1 - t, label="truth, other joint")
    assert "labelled but in no legend: ['truth', 'truth, other joint']" in "\n".join(layout_problems(fig))
