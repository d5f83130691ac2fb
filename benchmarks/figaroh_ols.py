#!/usr/bin/env python3
"""FIGAROH's least-squares identification of an arm from a CSV recording: the peer figure of
issue 16's ``sysid identify --method ols`` row, run by ``benchmarks/speed_table.py`` as a fresh
process in an interpreter where FIGAROH is installed (``pip install figaroh``; it may be a venv of
its own: nothing of sysid_ros is imported here).

What it does, with FIGAROH's own functions (figaroh 1.0.2): load the URDF (``load_robot``); read
the CSV (``time``, ``q_<joint>``, ``tau_<joint>`` columns, as ``sysid_ros``'s ``write_csv`` writes
them); low-pass positions and torques with FIGAROH's zero-phase Butterworth
(``low_pass_filter_data``, order 5) and differentiate the positions twice
(``calculate_first_second_order_differentiation``); build the joint-torque regressor with rotor
inertia columns (``build_regressor_basic``, ``has_actuator_inertia``: the URDF has no armature);
drop the columns that nothing excites (``get_index_eliminate``, ``build_regressor_reduced``);
decimate torques and regressor columns per joint by FIGAROH's default factor 10 with
``scipy.signal.decimate`` (zero phase), as FIGAROH's ``BaseIdentification`` does; base parameters
and their least-squares values by FIGAROH's double QR (``QRDecomposer.double_decomposition``).

Prints one JSON line: stage times [s] (from the start of this process's script, imports included),
the number of base parameters, rows, torque RMSE per joint on its own rows [N m], and with
``--eval STATES.npz`` (arrays ``q``, ``dq``, ``ddq`` of shape (N, n)) the predicted torque on
those states, computed after the timed part.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
from figaroh.identification.identification_tools import (  # noqa: E402
    calculate_first_second_order_differentiation,
    low_pass_filter_data,
)
from figaroh.identification.parameter import (  # noqa: E402
    add_standard_additional_parameters,
    get_standard_parameters,
)
from figaroh.tools.load_robot import load_robot  # noqa: E402
from figaroh.tools.qrdecomposition import QRDecomposer  # noqa: E402
from figaroh.tools.regressor import (  # noqa: E402
    build_regressor_basic,
    build_regressor_reduced,
    get_index_eliminate,
)
from scipy import signal  # noqa: E402

#: FIGAROH's low_pass_filter_data takes Wn = ts * fc / 2 as the fraction of Nyquist, so at 1 kHz
#: fc = 100 is a 25 Hz cut-off: the position cut-off sysid identify uses by default (5 x 5 Hz)
CUTOFF_SETTING = 100.0
DECIMATION = 10  # FIGAROH's BaseIdentification.solve default
ZERO_TOLERANCE = 1e-3  # FIGAROH's BaseIdentification.solve default (columns' squared norm)


def _read_csv(path: str, joints: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(t, q, tau)`` of shapes (N,), (N, n), (N, n) from a CSV with a header row."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    col = {name: k for k, name in enumerate(header)}
    missing = [c for j in joints for c in (f"q_{j}", f"tau_{j}") if c not in col]
    if "time" not in col or missing:
        raise SystemExit(f"{path}: expected columns time, q_<joint>, tau_<joint> for joints "
                         f"{list(joints)}; missing {['time'] if 'time' not in col else missing}")
    q = data[:, [col[f"q_{j}"] for j in joints]]
    tau = data[:, [col[f"tau_{j}"] for j in joints]]
    return data[:, col["time"]], q, tau


def _decimate_rows(x: np.ndarray, n: int, factor: int) -> np.ndarray:
    """Rows stacked joint by joint (``n`` blocks of N), each block decimated along its rows."""
    blocks = np.split(x, n, axis=0)
    return np.concatenate([signal.decimate(b, factor, axis=0, zero_phase=True) for b in blocks])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--urdf", required=True)
    parser.add_argument("--eval", help="npz of q, dq, ddq (N, n): predict the torque there")
    args = parser.parse_args()
    times = {"import": time.perf_counter() - START}

    t0 = time.perf_counter()
    robot = load_robot(args.urdf)
    model = robot.model
    joints = tuple(model.names[1:])
    n = model.nv
    config = {"has_friction": False, "has_actuator_inertia": True, "has_joint_offset": False,
              "is_joint_torques": True, "is_external_wrench": False, "force_torque": None,
              "act_idxv": list(range(n)), "Ia": [0.0] * n}
    params = get_standard_parameters(model, config)
    params.update(add_standard_additional_parameters(model, config))
    times["model"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    t, q, tau = _read_csv(args.csv, joints)
    times["read csv"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    ts = float(np.median(np.diff(t)))
    config.update(ts=ts, cut_off_frequency_butterworth=CUTOFF_SETTING)
    q_f = low_pass_filter_data(q, config, nbutter=5)
    tau_f = low_pass_filter_data(tau, config, nbutter=5)
    q_f, dq_f, ddq_f = calculate_first_second_order_differentiation(model, q_f, config)
    tau_f = tau_f[:len(q_f)]
    times["filter + differentiate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    w = build_regressor_basic(robot, q_f, dq_f, ddq_f, config)
    idx_e, params_r = get_index_eliminate(w, params, ZERO_TOLERANCE)
    w_e = build_regressor_reduced(w, idx_e)
    times["regressor"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    y = _decimate_rows(tau_f.T.reshape(-1), n, DECIMATION)
    w_d = _decimate_rows(w_e, n, DECIMATION)
    decomposer = QRDecomposer()
    w_b, _, names, phi_b, _ = decomposer.double_decomposition(y, w_d, params_r, params)
    times["base parameters + least squares"] = time.perf_counter() - t0
    times["total"] = time.perf_counter() - START

    residual = (y - w_b @ phi_b).reshape(n, -1)
    out = {"times_s": times, "base_parameters": len(names), "rows": len(y),
           "rmse_own_rows": np.sqrt(np.mean(residual ** 2, axis=1)).tolist(),
           "cond": decomposer.get_diagnostics()["cond_R1"], "joints": list(joints)}
    if args.eval:
        states = np.load(args.eval)
        w_v = build_regressor_reduced(build_regressor_basic(robot, states["q"], states["dq"],
                                                            states["ddq"], config), idx_e)
        out["eval_tau"] = (w_v[:, decomposer.get_base_indices()] @ phi_b).reshape(n, -1).T.tolist()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
