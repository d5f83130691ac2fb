"""The MIT-law closed loop stepped in compiled code: a numba loop calling MuJoCo's own ``mj_step``.

:meth:`MitPlant.run <sysid_ros.core.sim.plant.MitPlant.run>` spends ~15 µs of Python per step
around a 3–4 µs ``mj_step`` of a 6-DOF arm (the IV instruments' simulation: 4,000 steps per IV
iteration, ~60 ms). This loop does the same arithmetic per step — ``τ = kp (q* − q) + kd (q̇* − q̇)
+ τ_ff`` on the state before the step, clipped to the torque limits, written to ``qfrc_applied``,
then ``mj_step`` — in the same order of floating-point operations (no fast-math), so the states
are the Python loop's bit for bit (``test/core/sim/test_compiled_loop.py``), at the cost of
``mj_step`` alone.

``mj_step`` is called through its address in MuJoCo's shared library (the one the Python bindings
loaded), with the ``mjModel``/``mjData`` addresses the bindings expose; the state arrays given
to the loop are the bindings' views of that ``mjData``, so the loop reads the state MuJoCo just
wrote. The address is an argument (not a constant of the compiled code), so the kernel is cached
on disk like the project's others. :func:`available` says whether this MuJoCo build exposes what
the loop needs; the plant falls back to its Python loop otherwise.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import mujoco
import numpy as np
from llvmlite import ir

from sysid_ros.core.jit import numba

types = numba.types
intrinsic = numba.core.extending.intrinsic

__all__ = ["available", "step_closed_loop"]


@functools.cache
def _mj_step_address() -> int | None:
    """Address of ``mj_step`` in the MuJoCo library the bindings use (None if not found)."""
    folder = Path(mujoco.__file__).parent
    for lib in sorted(folder.glob("libmujoco.so*")) + sorted(folder.glob("libmujoco*.dylib")):
        try:
            handle = ctypes.CDLL(str(lib))
            return int(ctypes.cast(handle.mj_step, ctypes.c_void_p).value or 0) or None
        except (OSError, AttributeError):
            continue
    return None


def available(mj: mujoco.MjModel, data: mujoco.MjData) -> bool:
    """Whether the compiled loop can step ``mj``/``data`` (library and struct addresses found)."""
    return (_mj_step_address() is not None and isinstance(getattr(mj, "_address", None), int)
            and isinstance(getattr(data, "_address", None), int))


@intrinsic
def _call_step(typingctx, function, model, data):
    """``((void (*)(const mjModel*, mjData*)) function)(model, data)``, all three addresses."""
    sig = types.void(types.uintp, types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        word = ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [word, word])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1], args[2]])
        return context.get_dummy_value()

    return sig, codegen


def step_closed_loop(mj: mujoco.MjModel, data: mujoco.MjData, position: np.ndarray,
                     velocity: np.ndarray, effort: np.ndarray, kp: np.ndarray, kd: np.ndarray,
                     limit: np.ndarray, dofs: np.ndarray, qadr: np.ndarray, decimation: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step ``data`` once per row of the commands (``(K, n)`` each, gains broadcast to it) under
    the MIT law of the joints at ``qadr``/``dofs (n,)`` saturated at ``±limit (n,)``; record every
    ``decimation``-th step: ``qpos (R, nq)``, ``qvel (R, nv)`` (before the step), ``qacc (R, nv)``
    (of the step), applied torque ``(R, n)`` and whether it was clipped ``(R, n)``. The caller
    checks for divergence (MuJoCo's warning counters) afterwards.
    """
    steps, n = position.shape
    kp = np.ascontiguousarray(np.broadcast_to(kp, (steps, n)), dtype=float)
    kd = np.ascontiguousarray(np.broadcast_to(kd, (steps, n)), dtype=float)
    rows = (steps + decimation - 1) // decimation
    qpos, qvel = np.empty((rows, mj.nq)), np.empty((rows, mj.nv))
    qacc, applied = np.empty((rows, mj.nv)), np.empty((rows, n))
    saturated = np.zeros((rows, n), dtype=np.bool_)
    address = _mj_step_address()
    assert address is not None
    _loop(address, mj._address, data._address, data.qpos, data.qvel, data.qacc, data.qfrc_applied,
          np.ascontiguousarray(position, dtype=float), np.ascontiguousarray(velocity, dtype=float),
          np.ascontiguousarray(effort, dtype=float), kp, kd, np.asarray(limit, dtype=float),
          np.asarray(dofs, dtype=np.int64), np.asarray(qadr, dtype=np.int64), int(decimation),
          qpos, qvel, qacc, applied, saturated)
    return qpos, qvel, qacc, applied, saturated


@numba.njit(cache=True, nogil=False, fastmath=False, error_model="numpy")
def _loop(step, model, data, d_qpos, d_qvel, d_qacc, d_qfrc, position, velocity, effort, kp, kd,
          limit, dofs, qadr, decimation, qpos, qvel, qacc, applied, saturated):
    steps, n = position.shape
    tau = np.empty(n)
    for k in range(steps):
        record = k % decimation == 0
        i = k // decimation
        for j in range(n):  # plant.mit_torque: kp (q* − q) + kd (q̇* − q̇) + τ_ff, then the clip
            t = kp[k, j] * (position[k, j] - d_qpos[qadr[j]]) + kd[k, j] * (velocity[k, j] - d_qvel[dofs[j]])
            t = t + effort[k, j]
            tau[j] = min(max(t, -limit[j]), limit[j])
            if record:
                applied[i, j] = tau[j]
                saturated[i, j] = tau[j] != t
        if record:
            for j in range(d_qpos.size):
                qpos[i, j] = d_qpos[j]
            for j in range(d_qvel.size):
                qvel[i, j] = d_qvel[j]
        for j in range(d_qfrc.size):
            d_qfrc[j] = 0.0
        for j in range(n):
            d_qfrc[dofs[j]] = tau[j]
        _call_step(step, model, data)
        if record:
            for j in range(d_qacc.size):
                qacc[i, j] = d_qacc[j]
