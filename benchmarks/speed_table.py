#!/usr/bin/env python3
"""Issue 16's speed table in one run: every row measured on this machine, each beside its peer or
limit measured in the same run, printed as figure | measured | peer/limit | target | met?

Rows (``--rows``, default all; medians of ``--repeats``, default 5):

* ``regressor``: the torque regressor on the Panda (7 DOF), one sample per call and batched
  N = 10 000, per sample, against MuJoCo's ``mj_inverse`` and Pinocchio's
  ``computeJointTorqueRegressor`` timed in the same process (``benchmarks/regressor.py --json``;
  wall time; ratios per repeat's medians in that process);
* ``identify``: ``sysid identify --method ols`` on a 20 s UR5e bag recorded at 1 kHz
  (``sysid simulate test/robots/ur5e.xml``, not counted), whole command in a fresh process, beside
  the same data as CSV and FIGAROH's least-squares identification of that CSV
  (``benchmarks/figaroh_ols.py``, a fresh process of ``--figaroh-python`` or ``$FIGAROH_PYTHON``,
  e.g. a venv of its own made with ``python -m venv V && V/bin/pip install figaroh``; skipped with a
  note where FIGAROH is not importable) with its BLAS as installed and on one thread (as
  ``sysid identify`` runs it), runs interleaved. Accuracy of both: torque RMSE against the
  true model (``mj_inverse`` of ``ur5e.xml``) on the recording's states (every 10th sample, 0.5 s
  trimmed at each end; accelerations: central differences of the recorded velocities after a
  zero-phase 25 Hz Butterworth), ours from the command's ``identified.xml``;
* ``rls_logdet``: ``sysid identify --method rls_logdet``'s replay of 12.6 s at 1 kHz of the whole
  Panda with friction (``benchmarks/online_rate.py --replay-only --json``): real-time factor and
  per-update p99;
* ``dual_metric`` and ``pc_iv``: ``benchmarks/batch_speed.py --repeats N --json`` (UR5e, 8 s at
  5 kHz; dual_metric on 2,000 samples; the runs in one process, BLAS on one thread as
  ``sysid identify`` runs it).

The machine's load average (1, 5, 15 min) is printed at the start and the end: on a shared machine
wall times include the time other processes hold the cores, hence ratios measured side by side and,
for the whole commands, their CPU time (user + system) beside the wall time; targets are judged on
wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
from scipy import signal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sysid_ros.core import RobotModel  # noqa: E402
from sysid_ros.core.data.bag import read_bag, read_data  # noqa: E402
from sysid_ros.core.data.dataset import write_csv  # noqa: E402
from sysid_ros.core.model.urdf_export import write_urdf  # noqa: E402

ROWS = ("regressor", "identify", "rls_logdet", "dual_metric", "pc_iv")
BENCH = ROOT / "benchmarks"
UR5E = ROOT / "test" / "robots" / "ur5e.xml"
FIGAROH_MISSING = "FIGAROH not installed: pip install figaroh"
#: sysid identify runs BLAS on one thread itself (core/blas.py); FIGAROH is also run so, beside its default
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class Table:
    """Rows of figure | measured | peer/limit | target | met?"""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.notes: list[str] = []

    def add(self, figure: str, measured: str, peer: str, target: str, met: bool | None) -> None:
        self.rows.append((figure, measured, peer, target, "–" if met is None else "yes" if met else "no"))

    def print(self) -> None:
        print("\n| figure | measured | peer / limit (same run) | target | met? |")
        print("|---|---|---|---|---|")
        for row in self.rows:
            print("| " + " | ".join(row) + " |")
        for note in self.notes:
            print(f"\n{note}")


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + f" (1/5/15 min) on {os.cpu_count()} CPUs"


def _run(cmd: list[str]) -> tuple[float, str]:
    """Wall time [s] and stdout of ``cmd``; exits with its stderr when it fails."""
    wall, _, stdout = _run_timed(cmd)
    return wall, stdout


def _run_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall time and CPU time (user + system, the process and its children) [s] and stdout of
    ``cmd`` (``env``: variables set for it); exits with its stderr when it fails. On a loaded
    machine the CPU time leaves out the waits for a core that the wall time counts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env=None if env is None else os.environ | env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, proc.stdout


def _json_of(stdout: str) -> dict:
    """The last line of ``stdout``, a JSON object (the scripts' ``--json`` line)."""
    return json.loads(stdout.strip().splitlines()[-1])


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _span(values: list[float], fmt: str) -> str:
    return f"{_med(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


# ------------------------------------------------------------------------------------ regressor
def regressor_rows(table: Table, repeats: int) -> None:
    _, out = _run([sys.executable, str(BENCH / "regressor.py"), "--repeat", str(repeats), "--json"])
    fig = _json_of(out)
    wall, cpu = fig["wall_us"], fig["cpu_us"]
    inv = wall["inverse"]

    def cpu_ratio(key: str) -> str:  # the same ratio in this thread's CPU time (waits for a core out)
        return f" (CPU time {cpu[key] / cpu['inverse']:.2f}×)"

    pin = f"Pinocchio {wall['pin']:.1f} µs; " if "pin" in wall else "Pinocchio not installed; "
    single, batched = wall["single"], wall["batched"]
    table.add(f"torque regressor, one sample, {fig['nv']}-DOF arm (Panda)",
              f"{single:.1f} µs = {single / inv:.2f}× mj_inverse" + cpu_ratio("single"),
              pin + f"mj_inverse {inv:.1f} µs", "≤ 2× mj_inverse", single / inv <= 2.0)
    table.add("torque regressor, batched N = 10,000, per sample",
              f"{batched:.1f} µs = {batched / inv:.2f}× mj_inverse" + cpu_ratio("batched"),
              f"mj_inverse {inv:.1f} µs", "≤ 1× mj_inverse", batched / inv <= 1.0)


# ------------------------------------------------------------------------------------- identify
def _figaroh_available(python: str) -> bool:
    proc = subprocess.run([python, "-c", "import figaroh"], capture_output=True, check=False)
    return proc.returncode == 0


def _eval_states(csv: Path, model: RobotModel, tmp: Path) -> tuple[Path, np.ndarray]:
    """States of the recording (every 10th sample, 0.5 s trimmed at each end) with accelerations
    by central differences of the 25 Hz zero-phase low-passed velocities, saved as npz; and the
    true model's torque there, shape (M, n)."""
    ds = read_data(csv, joint_names=model.dof_joint_names)
    fs = ds.sample_rate
    b, a = signal.butter(4, 25.0 / (fs / 2))
    dq = signal.filtfilt(b, a, ds.dq, axis=0)
    ddq = np.gradient(dq, 1.0 / fs, axis=0)
    keep = slice(int(0.5 * fs), len(ds.t) - int(0.5 * fs), 10)
    states = {"q": ds.q[keep], "dq": ds.dq[keep], "ddq": ddq[keep]}
    path = tmp / "eval_states.npz"
    np.savez(path, **states)
    return path, _inverse(model, states)


def _inverse(model: RobotModel, states: dict[str, np.ndarray]) -> np.ndarray:
    """``mj_inverse`` torque of ``model`` at ``states`` (fixed base, scalar joints), (M, n)."""
    data = mujoco.MjData(model.mj)
    out = np.empty_like(states["q"])
    for i in range(len(out)):
        data.qpos[:], data.qvel[:], data.qacc[:] = states["q"][i], states["dq"][i], states["ddq"][i]
        mujoco.mj_inverse(model.mj, data)
        out[i] = data.qfrc_inverse
    return out


def _rmse(pred: np.ndarray, truth: np.ndarray) -> str:
    per_joint = np.sqrt(np.mean((pred - truth) ** 2, axis=0))
    overall = np.sqrt(np.mean((pred - truth) ** 2))
    return f"{overall:.3g} N·m (joints {per_joint.min():.2g}–{per_joint.max():.2g})"


def identify_rows(table: Table, repeats: int, figaroh_python: str, duration: float) -> None:
    sysid = [sys.executable, "-m", "sysid_ros.cli"]
    figaroh = _figaroh_available(figaroh_python)
    if not figaroh:
        print(f"{FIGAROH_MISSING} (in {figaroh_python}; --figaroh-python names another interpreter)")
    with tempfile.TemporaryDirectory(prefix="speed-table-") as tmp_name:
        tmp = Path(tmp_name)
        bag, csv, urdf = tmp / "bag", tmp / "data.csv", tmp / "ur5e.urdf"
        _run([*sysid, "simulate", str(UR5E), "--out", str(bag), "--duration", str(duration),
              "--rate", "1000", "--storage", "mcap"])
        write_csv(read_bag(bag, commands=False), csv)
        model = RobotModel.from_mjcf(UR5E)
        # FIGAROH reads URDF: the same arm
        write_urdf(model, model.params_of(model.mj), urdf, origin="nominal parameters of the model")
        states, truth = _eval_states(csv, model, tmp)
        common = ["--model", str(UR5E), "--method", "ols"]
        kinds = ("bag", "csv", "figaroh", "figaroh 1 BLAS")
        walls: dict[str, list[float]] = {k: [] for k in kinds}  # [s]
        cpus: dict[str, list[float]] = {k: [] for k in kinds}  # [s]
        figaroh_imports: list[float] = []  # [s] of FIGAROH's process spent importing
        figaroh_out: dict = {}
        if figaroh:  # once untimed, for its prediction on the evaluation states
            figaroh_out = _json_of(_run([figaroh_python, str(BENCH / "figaroh_ols.py"), str(csv),
                                         "--urdf", str(urdf), "--eval", str(states)])[1])
        for k in range(repeats):  # interleaved: a change of load hits them alike
            for kind, data in (("bag", bag), ("csv", csv)):
                out_dir = tmp / f"{kind}{k}"
                wall, cpu, _ = _run_timed([*sysid, "identify", str(data), *common, "--out", str(out_dir)])
                walls[kind].append(wall)
                cpus[kind].append(cpu)
            if figaroh:
                for kind, env in (("figaroh", None), ("figaroh 1 BLAS", ONE_BLAS_THREAD)):
                    wall, cpu, out = _run_timed([figaroh_python, str(BENCH / "figaroh_ols.py"), str(csv),
                                                 "--urdf", str(urdf)], env)
                    walls[kind].append(wall)
                    cpus[kind].append(cpu)
                    figaroh_imports.append(_json_of(out)["times_s"]["import"])
        ours = _inverse(RobotModel.from_mjcf(tmp / "bag0" / "identified.xml"), dict(np.load(states)))
        ours_fit = json.loads((tmp / "bag0" / "result.json").read_text())["diagnostics"]
    bag_s = _med(walls["bag"])
    peer = f"same data as CSV {_span(walls['csv'], '.2f')} s (CPU {_med(cpus['csv']):.2f} s)"
    accuracy = (f"identify row, accuracy on the same recording (torque RMSE against the true model "
                f"on its states): sysid identify --method ols {_rmse(ours, truth)}, its own "
                f"{ours_fit['n_rows']} regression rows' residual {ours_fit['residual_rms_total']:.3g} N·m")
    if figaroh:
        fig_rmse = _rmse(np.array(figaroh_out["eval_tau"]), truth)
        peer += (f"; FIGAROH (CSV → {figaroh_out['base_parameters']} base parameters, OLS) "
                 f"{_span(walls['figaroh'], '.2f')} s (CPU {_med(cpus['figaroh']):.2f} s), on one BLAS "
                 f"thread {_span(walls['figaroh 1 BLAS'], '.2f')} s "
                 f"(CPU {_med(cpus['figaroh 1 BLAS']):.2f} s); "
                 f"its imports {_med(figaroh_imports):.2f} s")
        own = np.sqrt(np.mean(np.square(figaroh_out["rmse_own_rows"])))
        accuracy += f"; FIGAROH {fig_rmse}, its own {figaroh_out['rows']} rows' residual {own:.3g} N·m"
    else:
        peer += f"; {FIGAROH_MISSING}"
    table.add(f"`sysid identify --method ols`, {duration:g} s UR5e bag at 1 kHz, whole command",
              f"{_span(walls['bag'], '.2f')} s (CPU {_med(cpus['bag']):.2f} s)", peer, "< 2 s",
              bag_s < 2.0)
    table.notes.append(accuracy)


# ----------------------------------------------------------------------------------- rls_logdet
def rls_rows(table: Table, repeats: int, duration: float, load: int) -> None:
    _, out = _run([sys.executable, str(BENCH / "online_rate.py"), "--replay-only", "--json",
                   "--repeats", str(repeats), "--duration", str(duration), "--load", str(load)])
    fig = _json_of(out)
    rtf, p99 = fig["realtime_factor"], fig["update_p99_ms"]
    beside = f", {load} CPU-bound processes beside it" if load else ""
    table.add(f"`rls_logdet`, whole 7-DOF arm with friction, replay of {fig['span_s']:.1f} s at "
              f"1 kHz{beside}",
              f"{fig['wall_s']:.2f} s = {rtf:.2f}× real time; update median "
              f"{fig['update_median_ms']:.3f} ms, p99 {p99:.3f} ms wall (rows, logging and any "
              f"preemption included); estimator update p99 {fig['cpu_update_p99_ms']:.3f} ms of "
              "thread CPU time",
              "1 kHz real time (1.00×; 1 ms per update)",
              "≥ 2× real time; p99 update < 1 ms", rtf >= 2.0 and p99 < 1.0)


# ---------------------------------------------------------------------------- dual_metric, pc_iv
def batch_rows(table: Table, repeats: int, rows: set[str]) -> None:
    """Both rows from one ``batch_speed.py`` process: medians of ``repeats`` runs in it (its first
    run pays the imports and numba's cache loads), range over the runs."""
    fig = _json_of(_run([sys.executable, str(BENCH / "batch_speed.py"), "--repeats", str(repeats),
                         "--json"])[1])
    if "dual_metric" in rows:
        dm = fig["dual_metric"]
        table.add("`dual_metric`, 6-DOF, 2,000 samples (`benchmarks/batch_speed.py`)",
                  f"{dm['total_s']:.2f} s ({min(dm['runs_s']):.2f}–{max(dm['runs_s']):.2f}; relative "
                  f"error {dm['relative_error_pct']:.2f} %)", "none public", "< 3 s", dm["total_s"] < 3.0)
    if "pc_iv" in rows:
        pc = fig["pc_iv"]
        table.add("`pc_iv`, 6-DOF, 78 parameters, 8 s at 5 kHz (same run)",
                  f"{pc['total_s']:.2f} s ({min(pc['runs_s']):.2f}–{max(pc['runs_s']):.2f}; relative "
                  f"error {pc['relative_error_pct']:.2f} %)", "seed: 40 s (MATLAB)", "< 1 s",
                  pc["total_s"] < 1.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    parser.add_argument("--repeats", type=int, default=5, help="medians of this many runs")
    parser.add_argument("--figaroh-python", default=os.environ.get("FIGAROH_PYTHON", sys.executable),
                        help="interpreter with FIGAROH installed, e.g. a venv's bin/python (default: "
                        "$FIGAROH_PYTHON, else this one)")
    parser.add_argument("--bag-duration", type=float, default=20.0, help="identify row's bag [s]")
    parser.add_argument("--replay-duration", type=float, default=12.6, help="rls_logdet replay [s]")
    parser.add_argument("--replay-load", type=int, default=0,
                        help="CPU-bound processes beside the rls_logdet replay")
    args = parser.parse_args()
    rows = {r.strip() for r in args.rows.split(",") if r.strip()}
    if not rows or rows - set(ROWS):
        parser.error(f"--rows: expected a comma list of {', '.join(ROWS)}, got {args.rows!r}")
    if args.repeats < 1:
        parser.error(f"--repeats: expected >= 1, got {args.repeats}")

    start = time.perf_counter()
    print(f"issue 16 speed table, median of {args.repeats}; load average at start {_load()}")
    table = Table()
    if "regressor" in rows:
        regressor_rows(table, args.repeats)
    if "identify" in rows:
        identify_rows(table, args.repeats, args.figaroh_python, args.bag_duration)
    if "rls_logdet" in rows:
        rls_rows(table, args.repeats, args.replay_duration, args.replay_load)
    if rows & {"dual_metric", "pc_iv"}:
        batch_rows(table, args.repeats, rows)
    table.print()
    print(f"\nload average at end {_load()}; whole run {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
