"""The consistency program's least-squares problems handed to Clarabel directly, without cvxpy.

:class:`~sysid_ros.core.batch.convex.ConvexProgram` states every program in cvxpy; importing cvxpy
(~2 s of CPU with the ``scipy.stats`` it loads) and compiling a program (~0.3 s) cost more than
Clarabel's solve on the problems ``pc_ls`` and the dual metric's re-weighting steps pose. Those
problems are the same few least squares over the same feasible set, so here they are written in
Clarabel's own conic form,

    min ½ xᵀ P x + qᵀ x   s.t.   b − A x ∈ K,

with ``x = θ̃`` (θ = scale ⊙ θ̃, the program's scaled variable) and, for a norm term, one epigraph
variable ``t``:

* objective ``‖F θ̃ − f‖₂ + ‖G θ̃ − g‖² + offset`` (:class:`SquaresObjective`) as cvxpy
  canonicalises it: the residual ``u = G θ̃ − g`` a variable tied by equalities, ``P = 2 I`` on
  ``u`` (``2 GᵀG`` itself squares G's condition number: Clarabel then stopped up to 5e-4 of the
  objective off the optimum on a dual-metric step), the norm as the second-order cone
  ``(t, F θ̃ − f)`` with ``q = 1`` on its epigraph variable ``t``;
* feasible set (:func:`feasible_set`), in :class:`ConvexProgram`'s constraints and labels: the
  linear inequalities (non-negative joint terms, mass, CoM and extent bounds) as one
  non-negative cone, then per body ``J(θ_b) − margin·I`` in the PSD cone (upper triangle
  column by column, off-diagonal entries × √2: Clarabel's ``PSDTriangleConeT``).

The cvxpy statement stays the reference (and the fall-back: :func:`solve_squares` returns None
unless Clarabel reports ``Solved``); test/core/batch/test_conic.py checks that both give the
same θ, objective and binding constraints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from sysid_ros.core.model.consistency import PSEUDO_INERTIA_BASIS
from sysid_ros.core.model.target import Target, sphere_slack

#: ConvexSolution.solver of a direct solve: the same solver as through cvxpy
SOLVER = "CLARABEL"
_SQRT2 = float(np.sqrt(2.0))
#: (row, column) of the upper triangle of a 4×4 matrix, column by column (Clarabel's svec order)
_TRIANGLE = [(i, j) for j in range(4) for i in range(j + 1)]


@dataclass(frozen=True)
class FeasibleSet:
    """``b − A θ̃`` in ``K``: ``a (m, p)`` (CSC), ``b (m,)``; the first ``linear`` rows in the
    non-negative cone, then one 10-row PSD triangle per body; ``rows``: ``(label, start, stop)``
    of each of :class:`ConvexProgram`'s constraints."""

    a: scipy.sparse.csc_matrix
    b: np.ndarray
    linear: int
    bodies: int
    rows: tuple[tuple[str, int, int], ...]

    def slack(self, x: np.ndarray) -> np.ndarray:
        """``b − A x`` (m,) of scaled parameters ``x (p,)``."""
        return self.b - self.a @ x

    def violation(self, x: np.ndarray) -> float:
        """The largest violation of any constraint at scaled parameters ``x (p,)`` (0 inside):
        a negative linear slack, a negative eigenvalue of a body's ``J − margin·I``."""
        s = self.slack(x)
        worst = float(max(0.0, -float(np.min(s[:self.linear], initial=0.0))))
        for k in range(self.bodies):
            lam = np.linalg.eigvalsh(_unsvec(s[self.linear + 10 * k:self.linear + 10 * (k + 1)]))
            worst = max(worst, -float(lam[0]))
        return worst


def feasible_set(target: Target, scale: np.ndarray, margin: float) -> FeasibleSet:
    """:class:`ConvexProgram`'s constraints (``consistent=True``) on ``θ = scale ⊙ θ̃``, in the
    order of its ``labels``' kinds: linear inequalities first, pseudo-inertias last."""
    p = target.n_params
    linear: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []  # label, idx, C, d: Cθ[idx]+d ≥ 0
    for i in target.nonnegative:
        linear.append((target.names[int(i)], np.array([int(i)]), np.ones((1, 1)), np.zeros(1)))
    for (i, low, high), (at_low, at_high) in zip(target.mass_bounds, mass_labels(target), strict=True):
        linear.append((at_low, np.array([i]), np.ones((1, 1)), np.array([-low])))
        linear.append((at_high, np.array([i]), -np.ones((1, 1)), np.array([high])))
    for (i, com, radius), (plus, minus) in zip(target.com_bounds, com_labels(target), strict=True):
        com = np.broadcast_to(np.asarray(com, dtype=float), (3,))
        idx = np.arange(i, i + 4)
        # h − m·com ≤ m·radius  and  m·com − h ≤ m·radius, per axis
        linear.append((plus, idx, np.column_stack([radius + com, -np.eye(3)]), np.zeros(3)))
        linear.append((minus, idx, np.column_stack([radius - com, np.eye(3)]), np.zeros(3)))
    for (i, centre, radius), label in zip(target.extent_bounds, extent_labels(target), strict=True):
        zero = float(sphere_slack(np.zeros(10), centre, radius))
        row = np.array([float(sphere_slack(np.eye(10)[n], centre, radius)) - zero for n in range(10)])
        linear.append((label, np.arange(i, i + 10), row[None, :], np.array([zero])))
    blocks_a, b, rows, start = [], [], [], 0
    for label, idx, c, d in linear:
        block = np.zeros((len(d), p))
        block[:, idx] = -c * scale[idx]  # s = Cθ + d = b − A θ̃
        blocks_a.append(block)
        b.append(d)
        rows.append((label, start, start + len(d)))
        start += len(d)
    n_linear = start
    sym = 0.5 * (PSEUDO_INERTIA_BASIS + PSEUDO_INERTIA_BASIS.transpose(0, 2, 1))  # (10, 4, 4)
    weights = np.array([1.0 if i == j else _SQRT2 for i, j in _TRIANGLE])
    svec_basis = np.stack([sym[:, i, j] for i, j in _TRIANGLE]) * weights[:, None]  # (10 rows, 10 φ)
    svec_eye = np.array([1.0 if i == j else 0.0 for i, j in _TRIANGLE])
    for label, sl in target.body_blocks:
        block = np.zeros((10, p))
        block[:, sl] = -svec_basis * scale[sl]
        blocks_a.append(block)
        b.append(-margin * svec_eye)
        rows.append((f"{label}.J", start, start + 10))
        start += 10
    a = scipy.sparse.csc_matrix(np.vstack(blocks_a)) if blocks_a else scipy.sparse.csc_matrix((0, p))
    return FeasibleSet(a, np.concatenate(b) if b else np.zeros(0), n_linear,
                       len(target.body_blocks), tuple(rows))


def extent_labels(target: Target) -> list[str]:
    """Constraint label of each of ``target.extent_bounds``."""
    return [f"{target.names[i].rsplit('.', 1)[0]} inside r={radius:.3g} m"
            for i, _c, radius in target.extent_bounds]


def mass_labels(target: Target) -> list[list[str]]:
    """``[lower, upper]`` constraint label of each of ``target.mass_bounds``."""
    return [[f"{target.names[i]} >= {low:.4g}", f"{target.names[i]} <= {high:.4g}"]
            for i, low, high in target.mass_bounds]


def com_labels(target: Target) -> list[list[str]]:
    """``[+, −]`` constraint label of each of ``target.com_bounds``."""
    out = []
    for i, _com, radius in target.com_bounds:
        body = target.names[i].rsplit(".", 1)[0]
        out.append([f"{body}.com within {radius:g} m (+)", f"{body}.com within {radius:g} m (-)"])
    return out


def _unsvec(v: np.ndarray) -> np.ndarray:
    """The symmetric 4×4 matrix of a svec ``v (10,)`` (off-diagonal entries × √2)."""
    m = np.zeros((4, 4))
    for value, (i, j) in zip(v, _TRIANGLE, strict=True):
        m[i, j] = m[j, i] = value if i == j else value / _SQRT2
    return m


@dataclass(frozen=True)
class SquaresObjective:
    """``‖F θ̃ − f‖₂ + ‖G θ̃ − g‖² + offset`` (``norm`` = ``(F (r, p), f (r,))`` or None,
    ``squares`` = ``(G (s, p), g (s,))``)."""

    squares: tuple[np.ndarray, np.ndarray]
    norm: tuple[np.ndarray, np.ndarray] | None = None
    offset: float = 0.0

    def value(self, x: np.ndarray) -> float:
        """The objective at ``x (p,)``."""
        g_mat, g = self.squares
        out = float(np.sum((g_mat @ x - g) ** 2)) + self.offset
        if self.norm is not None:
            out += float(np.linalg.norm(self.norm[0] @ x - self.norm[1]))
        return out


@dataclass(frozen=True)
class DirectSolution:
    """``x (p,)`` scaled parameters at Clarabel's optimum, the objective there, the largest
    absolute dual entry of each constraint (by label, as cvxpy's ``dual_value``) and the time."""

    x: np.ndarray
    objective: float
    multipliers: dict[str, float]
    solve_time: float
    iterations: int


def solve_squares(objective: SquaresObjective, feasible: FeasibleSet,
                  settings: dict | None = None) -> DirectSolution | str:
    """``min objective`` over ``feasible`` by Clarabel; ``settings``: Clarabel's (its defaults,
    as cvxpy passes them, otherwise). Returns Clarabel's status text instead of a solution unless
    it reports ``Solved`` (the caller then solves the cvxpy statement, with its fall-backs)."""
    import clarabel

    start = time.perf_counter()
    g_mat, g = (np.asarray(v, dtype=float) for v in objective.squares)
    p, m = g_mat.shape[1], g_mat.shape[0]
    norm_rows = 0 if objective.norm is None else np.asarray(objective.norm[0]).shape[0]
    n = p + m + (objective.norm is not None)  # x = (θ̃, u = G θ̃ − g, t ≥ ‖F θ̃ − f‖)
    hess = scipy.sparse.diags(np.concatenate([np.zeros(p), np.full(m, 2.0), np.zeros(n - p - m)]))
    q = np.zeros(n)
    eye = scipy.sparse.identity(m, format="csc")
    a_blocks = [scipy.sparse.hstack([scipy.sparse.csc_matrix(g_mat), -eye,  # G θ̃ − u = g
                                     scipy.sparse.csc_matrix((m, n - p - m))]),
                scipy.sparse.hstack([feasible.a, scipy.sparse.csc_matrix((feasible.a.shape[0], n - p))])]
    b_blocks = [g, feasible.b]
    cones = [clarabel.ZeroConeT(m)]
    if feasible.linear:
        cones.append(clarabel.NonnegativeConeT(feasible.linear))
    cones += [clarabel.PSDTriangleConeT(4) for _ in range(feasible.bodies)]
    if objective.norm is not None:
        f_mat, f = (np.asarray(v, dtype=float) for v in objective.norm)
        q[-1] = 1.0
        soc = np.zeros((1 + norm_rows, n))
        soc[0, -1] = -1.0  # s = (t, F θ̃ − f)
        soc[1:, :p] = -f_mat
        a_blocks.append(scipy.sparse.csc_matrix(soc))
        b_blocks.append(np.concatenate([[0.0], -f]))
        cones.append(clarabel.SecondOrderConeT(1 + norm_rows))
    config = clarabel.DefaultSettings()
    config.verbose = False
    for key, value in (settings or {}).items():
        setattr(config, key, value)
    solver = clarabel.DefaultSolver(scipy.sparse.csc_matrix(hess), q,
                                    scipy.sparse.vstack(a_blocks).tocsc(), np.concatenate(b_blocks),
                                    cones, config)
    result = solver.solve()
    status = str(result.status)
    if status != "Solved":
        return status
    x = np.array(result.x[:p], dtype=float)
    z = np.array(result.z, dtype=float)[m:]  # after the equalities' duals
    multipliers = {}
    for label, lo, hi in feasible.rows:
        dual = z[lo:hi] if lo < feasible.linear else _unsvec(z[lo:hi])
        multipliers[label] = float(np.max(np.abs(dual)))
    return DirectSolution(x, objective.value(x), multipliers, time.perf_counter() - start,
                          int(result.iterations))
