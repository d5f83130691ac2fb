"""Base (identifiable) parameters by QR decomposition with column pivoting.

For a well-excited regressor ``W (m, p)`` (random configurations, velocities and accelerations
within limits), ``W P = Q [R₁ R₂]`` with ``R₁ (r, r)`` upper-triangular and ``r`` the numerical
rank. The first ``r`` pivoted columns are independent; the others are combinations of them,
``W_d = W_i K`` with ``K = R₁⁻¹ R₂``. Hence ``W θ = W_i β`` with the base parameters
``β = θ_i + K θ_d = B θ``. The reduction depends only on the model's structure, not on data:
:func:`base_parameters` and :func:`body_base_parameters` keep it on disk, keyed by that structure
(:mod:`.base_cache`), so a process that needs a model's reduction computed before reads it back
instead of setting up the compiled regressor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sysid_ros.core import linalg as rla
from sysid_ros.core.errors import IdentificationError
from sysid_ros.core.model.base_cache import cached_arrays, structure_key

if TYPE_CHECKING:
    from sysid_ros.core.model.robot import RobotModel

__all__ = ["BaseParameters", "base_parameters", "body_base_parameters", "poorly_determined",
           "random_states"]


@dataclass(frozen=True)
class BaseParameters:
    """Base-parameter reduction of a model's parameter vector.

    ``independent``: column indices of the base parameters (pivot order);
    ``dependent``: the other columns; ``regrouping (r, p-r)``: K above;
    ``matrix (r, p)``: B with ``β = B θ``; ``names``: one readable expression per β;
    ``condition_number``: of the base columns of the random regressor used (columns scaled to unit
    norm, so it measures structure rather than units).
    """

    param_names: tuple[str, ...]
    independent: np.ndarray
    dependent: np.ndarray
    regrouping: np.ndarray
    matrix: np.ndarray
    names: tuple[str, ...]
    condition_number: float

    @property
    def rank(self) -> int:
        return len(self.independent)

    def of(self, theta: np.ndarray) -> np.ndarray:
        """Base parameters ``β (r,)`` of a standard parameter vector ``θ (p,)``."""
        return self.matrix @ np.asarray(theta, dtype=float)

    def columns(self, y: np.ndarray) -> np.ndarray:
        """Base regressor: the independent columns of ``Y (..., p)``."""
        return np.asarray(y)[..., self.independent]

    def standard_from_base(self, beta: np.ndarray) -> np.ndarray:
        """One standard vector with these base values: ``θ_i = β``, ``θ_d = 0``."""
        theta = np.zeros(len(self.param_names))
        theta[self.independent] = beta
        return theta

    def as_dict(self) -> dict:
        """Rank, names, and the regrouping ``β = θ_independent + K θ_dependent`` (K by name)."""
        dependent = [self.param_names[i] for i in self.dependent]
        return {
            "rank": self.rank,
            "names": list(self.names),
            "independent": [self.param_names[i] for i in self.independent],
            "dependent": dependent,
            "regrouping": {
                self.param_names[i]: {d: float(k) for d, k in zip(dependent, row, strict=True) if k}
                for i, row in zip(self.independent, self.regrouping, strict=True)},
            "condition_number": self.condition_number,
        }

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every field as a NumPy array (strings as unicode arrays): what :mod:`.base_cache` stores."""
        return {"param_names": np.array(self.param_names, dtype=str),
                "independent": np.asarray(self.independent, dtype=np.int64),
                "dependent": np.asarray(self.dependent, dtype=np.int64),
                "regrouping": np.asarray(self.regrouping, dtype=float),
                "matrix": np.asarray(self.matrix, dtype=float),
                "names": np.array(self.names, dtype=str),
                "condition_number": np.array(self.condition_number, dtype=float)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BaseParameters:
        """The reduction :meth:`to_arrays` gave (the same values, bit for bit)."""
        p = len(arrays["param_names"])
        rank = len(arrays["independent"])
        return cls(tuple(str(n) for n in arrays["param_names"]),
                   np.asarray(arrays["independent"], dtype=np.int64).reshape(rank),
                   np.asarray(arrays["dependent"], dtype=np.int64).reshape(p - rank),
                   np.asarray(arrays["regrouping"], dtype=float).reshape(rank, p - rank),
                   np.asarray(arrays["matrix"], dtype=float).reshape(rank, p),
                   tuple(str(n) for n in arrays["names"]), float(arrays["condition_number"]))


def poorly_determined(beta: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Which base parameters the data barely determine, ``(r,)`` bool: a standard deviation larger
    than the value's magnitude and not negligible (above 1e-3 of the values' RMS: a parameter
    that is ~0 with a tiny std is not news). An infinite std (a direction the rows do not reach)
    counts; an unknown (NaN) one does not. ``beta (r,)``, ``std (r,)`` in the parameters' units."""
    beta = np.asarray(beta, dtype=float)
    std = np.asarray(std, dtype=float)
    floor = 1e-3 * float(np.sqrt(np.mean(beta**2))) if beta.size else 0.0
    with np.errstate(invalid="ignore"):
        return (std > np.abs(beta)) & (std > floor)


def random_states(model: RobotModel, n: int, *, seed: int = 0, speed: float = 2.0,
                  accel: float = 10.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random ``(q (n, nq), dq (n, nv), ddq (n, nv))`` inside the joint limits.

    Unlimited hinge/slide joints draw from ±π; free/ball joints draw uniform unit quaternions
    (and positions within ±1 m). Velocities ~ U(±speed), accelerations ~ U(±accel), SI units.
    """
    rng = np.random.default_rng(seed)
    q = np.tile(model.mj.qpos0, (n, 1)).astype(float)
    for j in model.joints:
        a = j.qpos_adr
        if j.type in ("hinge", "slide"):
            lo, hi = j.range if j.range is not None else (-np.pi, np.pi)
            q[:, a] = rng.uniform(lo, hi, n)
        else:
            if j.type == "free":
                q[:, a:a + 3] = rng.uniform(-1.0, 1.0, (n, 3))
                a += 3
            quat = rng.normal(size=(n, 4))
            q[:, a:a + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    dq = rng.uniform(-speed, speed, (n, model.nv))
    ddq = rng.uniform(-accel, accel, (n, model.nv))
    return q, dq, ddq


def base_parameters(model: RobotModel, *, n_samples: int | None = None, seed: int = 0,
                    rtol: float = 1e-8) -> BaseParameters:
    """Numerical base-parameter reduction of ``model`` (see module docstring), from the disk
    cache when computed before (:mod:`.base_cache`: the same values).

    ``rtol``: a pivot ``|R_kk|`` below ``rtol·|R_00|`` counts as zero. Columns are scaled to
    unit norm before the decomposition so that parameters of different units compete fairly.
    """
    n = n_samples or max(200, 4 * model.n_params // max(1, model.nv) + 50)

    def compute() -> dict[str, np.ndarray]:
        from sysid_ros.core.model.regressor import torque_regressor  # (compiled kernels: when used)

        q, dq, ddq = random_states(model, n, seed=seed)
        return reduce_regressor(torque_regressor(model, q, dq, ddq), model.param_names,
                                rtol=rtol).to_arrays()

    key = structure_key(model, ("torque", n, seed, rtol))
    return BaseParameters.from_arrays(cached_arrays(key, model.param_names, compute))


def body_base_parameters(model: RobotModel, body: int, names: tuple[str, ...], *, n_samples: int = 300,
                         seed: int = 0, rtol: float = 1e-8) -> BaseParameters:
    """Base-parameter reduction of the 10 columns of one moving ``body`` (MuJoCo id), e.g. of a
    payload rigidly attached to it, named ``names`` (10); from the disk cache when computed before."""
    def compute() -> dict[str, np.ndarray]:
        from sysid_ros.core.model.regressor import body_regressor  # (compiled kernels: when used)

        q, dq, ddq = random_states(model, n_samples, seed=seed)
        y_b, _ = body_regressor(model, body, q, dq, ddq)
        return reduce_regressor(y_b, names, rtol=rtol).to_arrays()

    key = structure_key(model, ("body", int(body), tuple(names), n_samples, seed, rtol))
    return BaseParameters.from_arrays(cached_arrays(key, tuple(names), compute))


def reduce_regressor(y: np.ndarray, names: tuple[str, ...], *, rtol: float = 1e-8) -> BaseParameters:
    """Base-parameter reduction from a well-excited regressor ``Y (..., p)`` with column ``names``."""
    import scipy.linalg  # (~0.3 s of CPU to import: when used)

    p = len(names)
    w = np.asarray(y).reshape(-1, p)
    norms = np.linalg.norm(w, axis=0)
    live = norms > 1e-12 * max(norms.max(), 1e-300)
    scale = np.where(live, norms, 1.0)
    _, r, piv = scipy.linalg.qr(w / scale, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    if diag.size == 0 or diag[0] == 0.0:
        raise IdentificationError("the regressor is identically zero: no parameter is identifiable")
    rank = int(np.sum(diag > rtol * diag[0]))
    ind, dep = piv[:rank], piv[rank:]
    # W_d = W_i K in the scaled columns, K_scaled = R1^-1 R2; undo the scaling.
    k_scaled = scipy.linalg.solve_triangular(r[:rank, :rank], r[:rank, rank:]) if len(dep) else \
        np.zeros((rank, 0))
    k = k_scaled * scale[dep][None, :] / scale[ind][:, None]
    k[np.abs(k) < 1e-10 * max(1.0, np.abs(k).max(initial=0.0))] = 0.0
    order = np.argsort(ind)  # present base parameters in the model's parameter order
    ind, k = ind[order], k[order]
    matrix = np.zeros((rank, p))
    matrix[np.arange(rank), ind] = 1.0
    matrix[:, dep] = k
    base_names = tuple(_expression(names, i, dep, k_row) for i, k_row in zip(ind, k, strict=True))
    wb = w[:, ind] / scale[ind]
    sv = rla.svdvals(wb)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    return BaseParameters(tuple(names), ind, dep, k, matrix, base_names, cond)


def _expression(names: tuple[str, ...], i: int, dep: np.ndarray, k_row: np.ndarray) -> str:
    terms = [names[i]]
    for j, c in zip(dep, k_row, strict=True):
        if c == 0.0:
            continue
        if np.isclose(c, 1.0, rtol=0, atol=1e-12):
            terms.append(f"+ {names[j]}")
        elif np.isclose(c, -1.0, rtol=0, atol=1e-12):
            terms.append(f"- {names[j]}")
        else:
            terms.append(f"{'+' if c > 0 else '-'} {abs(c):.6g}*{names[j]}")
    return " ".join(terms)
