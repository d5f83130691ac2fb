"""The `sysid` command is on PATH after `source tools/env.sh`, as the README's CLI lines type it."""

from __future__ import annotations

import os
import subprocess

import pytest
from support.robots import ROOT


@pytest.mark.slow
def test_sysid_on_path_after_sourcing_env(tmp_path):
    # A shell that has nothing of ours on PATH, in another directory: the README's first CLI line.
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    script = (f"command -v sysid && exit 3; source {ROOT / 'tools' / 'env.sh'} && command -v sysid "
              f"&& sysid inspect {ROOT}/config/robots/yam_damiao.xml")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, *rest = proc.stdout.splitlines()
    assert first.endswith("/sysid")
    assert any(line.split()[:2] == ["joint", "joint1"] for line in rest), proc.stdout
