"""Issue 14 acceptance: the same pipeline from a URDF with ``package://`` meshes gives the same
result as from the MJCF. The URDF of the UR5e-like test robot is written by the project's URDF
writer from test/robots/ur5e.xml, with visual meshes under ``package://`` that exist nowhere
(dropped on load: meshes carry no dynamics); one simulated bag of the MJCF is identified with
``--model ur5e.urdf`` and with ``--model ur5e.xml``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from support.robots import TEST_ROBOTS

from sysid_ros.cli import main
from sysid_ros.core import RobotModel
from sysid_ros.core.model.urdf_export import write_urdf

MJCF = TEST_ROBOTS / "ur5e.xml"


def _urdf_with_package_meshes(path):
    model = RobotModel.from_mjcf(MJCF)
    write_urdf(model, model.nominal, path)
    tree = ET.parse(path)
    for link in tree.getroot().findall("link"):
        visual = ET.SubElement(link, "visual")
        mesh = ET.SubElement(ET.SubElement(visual, "geometry"), "mesh")
        mesh.set("filename", f"package://ur_description/meshes/ur5e/visual/{link.get('name')}.dae")
    tree.write(path)
    return path


def _by_combination(base: dict) -> dict:
    """Base-parameter values keyed by their combination as a set of signed terms."""
    return {frozenset(name.replace(" - ", " + -").split(" + ")): v["value"] for name, v in base.items()}


def test_a_urdf_with_package_meshes_identifies_as_its_mjcf(tmp_path, capsys):
    urdf = _urdf_with_package_meshes(tmp_path / "ur5e.urdf")
    assert "package://ur_description" in urdf.read_text()
    bag = tmp_path / "bag"
    assert main(["simulate", str(MJCF), "--out", str(bag), "--duration", "4", "--rate", "500"]) == 0
    docs = {}
    # --no-armature: URDF has no rotor inertia, so the URDF's prior would hold Ia = 0 where the
    # MJCF's holds 0.1, and the exported parameters take weakly determined directions from the prior
    # (by default the MJCF's declared armature would be identified, the URDF's not)
    for name, model in (("mjcf", MJCF), ("urdf", urdf)):
        out = tmp_path / name
        # --accept-cost: without the armature the consistent model fits this run's torque markedly
        # worse than unconstrained least squares (exit 3 otherwise, see test_accept_cost.py)
        code = main(["identify", str(bag), "--model", str(model), "--method", "ols", "--no-armature",
                     "--no-plots", "--accept-cost", "--out", str(out)])
        assert code == 0, capsys.readouterr().err
        assert (out / "identified.xml").is_file() and (out / "identified.urdf").is_file()
        docs[name] = json.loads((out / "result.json").read_text())
    mjcf, urdf_doc = docs["mjcf"], docs["urdf"]
    for doc in docs.values():  # the plausible fit solved (its conic fall-back once failed on one)
        assert not doc["diagnostics"]["exported_model"]["status"].startswith("failed"), \
            doc["diagnostics"]["exported_model"]["status"]
    assert list(urdf_doc["parameters"]) == list(mjcf["parameters"])  # same names, same order
    # the least-squares base parameters: the same combinations (the regressors agree to rounding,
    # ~1e-14, which may only change the order of their terms and which of two equal columns
    # names a combination) with the same values
    base_m, base_u = (_by_combination(d["base_parameters"]) for d in (mjcf, urdf_doc))
    assert set(base_u) == set(base_m)
    scale = max(abs(v) for v in base_m.values())
    assert max(abs(base_u[k] - base_m[k]) for k in base_m) <= 1e-9 * scale
    # the exported (consistent) parameters, from the same convex projection of those
    exp_m = mjcf["exported_parameters"]["values"]
    exp_u = urdf_doc["exported_parameters"]["values"]
    assert list(exp_u) == list(exp_m)
    # what the data determine, the exported models' torque on the data, agrees; this short run's
    # data hold the armature the model leaves out, so the export's program has binding bounds and
    # its conic solve may end inaccurate along the directions the data leave free (the first
    # link's mass: 3.76 vs 4.06 kg seen), which therefore are not compared here
    assert urdf_doc["fit"]["relative_error_percent"] == pytest.approx(
        mjcf["fit"]["relative_error_percent"], rel=1e-2)
    for k in ("upper_arm_link.m", "forearm_link.m"):  # masses the data determine
        assert exp_u[k] == pytest.approx(exp_m[k], rel=2e-2), k
