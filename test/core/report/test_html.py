"""report.html from a real identification (simulated arm, pc_ls, held-out run), without a browser:
the files written, every section, the figures' data, nothing loaded from outside; the verdict's
rules on edited result documents; which parameters the data determined. (test/ros/process/
test_report_browser.py opens the page in Chromium.)"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser

import numpy as np
import pytest
from support.robots import DEFAULT_ROBOT

from sysid_ros.cli import main
from sysid_ros.core.batch.identify import IdentifyOptions, prepare, run_method
from sysid_ros.core.errors import SysIdError
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.model.target import batch_target
from sysid_ros.core.report.files import write_outputs
from sysid_ros.core.report.html import SECTIONS, determined_by, write_report
from sysid_ros.core.report.metrics import evaluate
from sysid_ros.core.report.report_data import ReportInputs, read_torques
from sysid_ros.core.report.validation import CHECKS
from sysid_ros.core.report.verdict import HELDOUT_LIMIT, verdict_of
from sysid_ros.core.sim.simulation import SensorModel
from sysid_ros.core.sim.synthetic import simulate_dataset

pytestmark = pytest.mark.slow  # a module fixture of several seconds


@pytest.fixture(scope="module")
def identified(tmp_path_factory):
    """``(folder, evaluation)`` of pc_ls on 8 s of the default arm with torque noise, held out on
    another 4 s run."""
    model = RobotModel.load(str(DEFAULT_ROBOT))
    target = batch_target(model)
    options = IdentifyOptions(method="pc_ls")
    data = simulate_dataset(model, duration=8.0, seed=1, sensor=SensorModel(torque_noise=0.05, seed=1))
    held = simulate_dataset(model, duration=4.0, seed=2, sensor=SensorModel(torque_noise=0.05, seed=2))
    prep = prepare(data, target, options.preprocessing)
    result = run_method(prep, options)
    evaluation = evaluate(result, prep, validation=prepare(held, target, options.preprocessing))
    out = tmp_path_factory.mktemp("identified")
    bag = out.parent / "inputs.csv"
    bag.write_text("t,q\n0,0\n")
    paths, doc = write_outputs(out, result, target, evaluation, plots=False, inputs=[bag])
    return out, evaluation, doc, paths


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        self._script = a.get("id") if tag == "script" else None

    def handle_data(self, data):
        if self._script:
            self.scripts[self._script] = self.scripts.get(self._script, "") + data


def test_identify_writes_a_self_contained_report(identified):
    out, evaluation, doc, paths = identified
    names = {p.name for p in paths}
    assert {"result.json", "torques.npz", "report.html"} <= names
    text = (out / "report.html").read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(text)
    # nothing from outside: no element names a URL (scripts inline, no links, images, frames)
    for tag, attrs in parser.tags:
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
    sections = [a["id"] for t, a in parser.tags if t == "section"]
    assert sections == [sid for sid, _ in SECTIONS]
    for _, heading in SECTIONS:
        assert f"<h2>{heading}</h2>" in text
    # the figures: torque of both data sets, residuals, bodies, precision; each with data
    figures = {k: json.loads(v) for k, v in parser.scripts.items() if k.startswith("fig-")}
    assert set(figures) == {"fig-torque-fit", "fig-torque-validation", "fig-residuals", "fig-links",
                            "fig-precision"}
    joints, series = read_torques(out / "torques.npz")
    n = len(joints)
    assert len(figures["fig-torque-fit"]["data"]) == 2 * n  # measured and predicted per joint
    for fig in figures.values():
        assert fig["data"] and all(len(t["y"]) > 0 for t in fig["data"])
    # the series file holds what the evaluation scored
    np.testing.assert_array_equal(series[0].measured, evaluation.fit.measured)
    np.testing.assert_array_equal(series[1].predicted, evaluation.validation.predicted)
    # provenance: inputs hashed, model named, command line
    prov = doc["provenance"]
    assert prov["inputs"][0]["sha256"] and prov["model"]["path"].endswith(DEFAULT_ROBOT.name)
    assert prov["model"]["sha256"] in text and prov["inputs"][0]["sha256"] in text


def test_report_command_rebuilds_the_same_page(identified, tmp_path, capsys):
    """``sysid report DIR --out FILE`` gives the page identify wrote (one path)."""
    out, *_ = identified
    assert main(["report", str(out), "--out", str(tmp_path / "again.html")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'again.html'}"
    again = (tmp_path / "again.html").read_text(encoding="utf-8")
    assert again == (out / "report.html").read_text(encoding="utf-8")


def test_report_of_a_validation_folder_has_the_six_checks(identified, tmp_path):
    """A ``sysid validate --out`` folder (validation.json naming the result it validated): the
    page has one PASS/FAIL row per check and the verdict counts the suite."""
    out, *_ = identified
    checks = [{"name": name, "passed": k != 4, "figure": 1.5 * k, "threshold": 10.0, "unit": "%",
               "comparison": "<", "criterion": f"criterion of {name}"} for k, name in enumerate(CHECKS)]
    (tmp_path / "validation.json").write_text(json.dumps(
        {"passed": False, "checks": checks, "result": {"source": str(out / "result.json")}}))
    page = write_report(tmp_path).read_text(encoding="utf-8")
    section = page[page.index('<section id="validation">'):page.index('<section id="warnings">')]
    assert section.count("<td class='l s'>PASS</td>") == 5 and section.count("<td class='l s'>FAIL</td>") == 1
    for name in CHECKS:
        assert f"<td class='l'>{name}</td>" in section
    assert "NOT TRUSTWORTHY: validation suite failed" in page


def test_report_of_a_folder_without_a_result(tmp_path):
    with pytest.raises(SysIdError, match=r"expected a result.json .*found \['x.txt'\]"):
        (tmp_path / "x.txt").write_text("")
        ReportInputs.load(tmp_path)
    with pytest.raises(SysIdError, match="expected a result folder"):
        ReportInputs.load(tmp_path / "missing")


def test_verdict_rules(identified):
    _, _, doc, _ = identified
    ok = verdict_of(doc)
    assert ok.trustworthy, ok.headline()
    topics = [f.topic for f in ok.findings]
    assert topics[:2] == ["solver", "consistency"] and "held-out error" in topics

    bad = copy.deepcopy(doc)
    bad["diagnostics"]["status"] = "optimal_inaccurate"
    v = verdict_of(bad)
    assert not v.trustworthy and v.headline().startswith("NOT TRUSTWORTHY: solver failed")

    bad = copy.deepcopy(doc)
    bad["diagnostics"]["consistency"]["consistent"] = False
    bad["diagnostics"]["consistency"]["bodies"]["link_2"] = {"consistent": False, "min_eigenvalue": -1}
    v = verdict_of(bad)
    assert not v.trustworthy and "link_2" in next(f.text for f in v.findings if f.topic == "consistency")

    bad = copy.deepcopy(doc)
    bad["validation"]["relative_error_percent"] = HELDOUT_LIMIT + 1
    assert verdict_of(bad).headline().startswith("NOT TRUSTWORTHY: held-out error failed")

    none = copy.deepcopy(doc)
    del none["validation"]
    assert "held-out error" in verdict_of(none).headline()  # a caution: no held-out data

    suite = {"checks": [{"name": "parameter_recovery", "passed": True},
                        {"name": "repeatability", "passed": False}]}
    v = verdict_of(doc, suite)
    assert not v.trustworthy and "failed: repeatability" in v.findings[-1].text


def test_determined_by(identified):
    """A parameter entering no base parameter (the first body's mass on a fixed base: it never
    moves) is the prior's; one entering a well-determined base parameter is the data's."""
    _, _, doc, _ = identified
    how = determined_by(doc)
    assert set(how) == set(doc["parameters"])
    base = doc["base"]
    entered = set(base["independent"]) | {d for g in base["regrouping"].values() for d in g}
    for name, source in how.items():
        if name not in entered:
            assert source == "prior: no effect on the torques", name
    assert list(how.values()).count("data") >= 1
