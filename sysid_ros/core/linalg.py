"""Decompositions of data-dependent matrices that do not give up on the first LAPACK failure.

NumPy's and SciPy's default SVD is LAPACK's divide-and-conquer ``gesdd``, which can fail to
converge (``LinAlgError: SVD did not converge``) on a matrix that the slower QR-iteration
``gesvd`` decomposes without trouble (issue 22: a 78×78 matrix of ``sysid validate``'s
repeatability check). Every SVD, null space, least-squares solve, pseudo-inverse and symmetric
eigendecomposition of a matrix built from data goes through here:

* :func:`svd`, :func:`svdvals`: ``gesdd``, then ``gesvd``;
* :func:`null_space`: the SVD above, then QR with column pivoting;
* :func:`lstsq`: ``gelsd`` (SVD), then ``gelsy`` (QR with pivoting), then ``gelss``;
* :func:`pinv`: from :func:`svd`;
* :func:`eigh`, :func:`eigvalsh`: ``syevd`` (NumPy), then ``syevr`` and ``syev`` (SciPy), batched
  matrices one by one.

When every route fails, or the matrix holds NaN/inf (no route can succeed), the error is a
:class:`~sysid_ros.core.errors.IdentificationError` that names the operation, the matrix's shape
and what was tried: one line for the user, not a LAPACK traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from sysid_ros.core.errors import IdentificationError

log = logging.getLogger(__name__)
T = TypeVar("T")


def _scipy():
    """``scipy.linalg``, imported where a route needs it (most calls end at NumPy's first route;
    the import costs ~0.3 s of CPU, paid by a node's start-up if made at module level)."""
    import scipy.linalg

    return scipy.linalg


def _finite(a: np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise IdentificationError(f"{what} of a {a.shape} matrix: it holds {bad} NaN/inf entries "
                                  "(expected finite data; check the recording for NaN samples)")
    return a


def _first(what: str, shape: tuple[int, ...], routes: list[tuple[str, Callable[[], T]]]) -> T:
    """The first route that succeeds; :class:`IdentificationError` naming them all if none."""
    failures = []
    for name, route in routes:
        try:
            out = route()
        except (np.linalg.LinAlgError, ValueError) as exc:
            failures.append(f"{name}: {exc}")
            continue
        if failures:
            log.info("%s of a %s matrix: %s failed, %s succeeded", what, shape, "; ".join(failures), name)
        return out
    raise IdentificationError(f"{what} of a {shape} matrix failed with every LAPACK route tried ("
                              + "; ".join(failures) + ")")


def svd(a, *, full_matrices: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(u, s, vt)`` of ``a (m, n)`` (reduced unless ``full_matrices``): gesdd, then gesvd."""
    a = _finite(a, "SVD")
    return _first("SVD", a.shape, [
        ("gesdd", lambda: np.linalg.svd(a, full_matrices=full_matrices)),
        ("gesvd", lambda: _scipy().svd(a, full_matrices=full_matrices, lapack_driver="gesvd",
                                           check_finite=False)),
    ])


def svdvals(a) -> np.ndarray:
    """Singular values of ``a (m, n)``, descending: gesdd, then gesvd."""
    a = _finite(a, "singular values")
    return _first("singular values", a.shape, [
        ("gesdd", lambda: np.linalg.svd(a, compute_uv=False)),
        ("gesvd", lambda: _scipy().svd(a, compute_uv=False, lapack_driver="gesvd",
                                           check_finite=False)),
    ])


def null_space(a, *, rcond: float | None = None) -> np.ndarray:
    """Orthonormal basis ``(n, k)`` of the null space of ``a (m, n)``: right singular vectors with
    ``s ≤ rcond · s_max`` (``rcond`` None: ``max(m, n) · eps``, as :func:`scipy.linalg.null_space`),
    from :func:`svd`; if no SVD converges, from QR with column pivoting of ``aᵀ`` (the columns of
    Q past the rank of ``a``)."""
    a = _finite(a, "null space")
    m, n = a.shape
    tol = (max(m, n) * np.finfo(float).eps) if rcond is None else float(rcond)

    def from_svd() -> np.ndarray:
        _, s, vt = _first("SVD", a.shape, [
            ("gesdd", lambda: np.linalg.svd(a, full_matrices=True)),
            ("gesvd", lambda: _scipy().svd(a, full_matrices=True, lapack_driver="gesvd",
                                               check_finite=False)),
        ])
        rank = int(np.sum(s > tol * s[0])) if s.size and s[0] > 0 else 0
        return vt[rank:].T.conj()

    def from_qr() -> np.ndarray:
        q, r, _ = _scipy().qr(a.T, pivoting=True, check_finite=False)  # aᵀ P = Q R
        d = np.abs(np.diag(r))
        rank = int(np.sum(d > tol * d[0])) if d.size and d[0] > 0 else 0
        return q[:, rank:]

    def svd_route() -> np.ndarray:
        try:
            return from_svd()
        except IdentificationError as exc:
            raise np.linalg.LinAlgError(str(exc)) from None

    return _first("null space", a.shape, [("SVD", svd_route), ("QR with column pivoting", from_qr)])


def lstsq(a, b, *, rcond: float | None = None) -> np.ndarray:
    """Minimum-norm least-squares solution ``x`` of ``a x ≈ b`` (``a (m, n)``, ``b (m,)`` or
    ``(m, k)``): gelsd (SVD), then gelsy (QR with column pivoting), then gelss."""
    a = _finite(a, "least squares")
    b = _finite(b, "least squares (right-hand side)")
    cond = rcond if rcond is not None else np.finfo(float).eps * max(a.shape)  # NumPy's default
    routes = [("gelsd", lambda: np.linalg.lstsq(a, b, rcond=rcond)[0])]
    for driver in ("gelsy", "gelss"):
        routes.append((driver, lambda d=driver: _scipy().lstsq(a, b, cond=cond, lapack_driver=d,
                                                                    check_finite=False)[0]))
    return _first("least squares", a.shape, routes)


def pinv(a, *, rcond: float = 1e-15) -> np.ndarray:
    """Moore–Penrose pseudo-inverse ``(n, m)`` of ``a (m, n)`` from :func:`svd` (singular values
    below ``rcond · s_max`` dropped, as :func:`numpy.linalg.pinv`)."""
    a = _finite(a, "pseudo-inverse")
    if a.size == 0:
        return np.zeros(a.shape[::-1])
    u, s, vt = svd(a)
    keep = s > rcond * (s[0] if s.size else 0.0)
    inv = np.zeros_like(s)
    inv[keep] = 1.0 / s[keep]
    return (vt.T * inv) @ u.T


def _eigh_one(a: np.ndarray, values_only: bool):
    return _first("symmetric eigendecomposition", a.shape, [
        ("syevd", lambda: np.linalg.eigvalsh(a) if values_only else np.linalg.eigh(a)),
        ("syevr", lambda: _scipy().eigh(a, eigvals_only=values_only, driver="evr", check_finite=False)),
        ("syev", lambda: _scipy().eigh(a, eigvals_only=values_only, driver="ev", check_finite=False)),
    ])


def _eigh_any(a, values_only: bool, what: str):
    """:func:`numpy.linalg.eigh` (or eigvalsh) of ``a (..., n, n)``, each matrix of the stack
    through the LAPACK fall-backs of :func:`_eigh_one` when numpy's driver fails."""
    a = _finite(a, what)
    try:
        return np.linalg.eigvalsh(a) if values_only else np.linalg.eigh(a)
    except np.linalg.LinAlgError:
        pass
    if a.ndim == 2:
        return _eigh_one(a, values_only)
    parts = [_eigh_one(m, values_only) for m in a.reshape(-1, *a.shape[-2:])]
    if values_only:
        return np.stack(parts).reshape(a.shape[:-1])
    return (np.stack([p[0] for p in parts]).reshape(a.shape[:-1]),
            np.stack([p[1] for p in parts]).reshape(a.shape))


def eigh(a) -> tuple[np.ndarray, np.ndarray]:
    """``(w, v)`` ascending eigenvalues and eigenvectors of symmetric ``a (..., n, n)`` (lower
    triangle used, as :func:`numpy.linalg.eigh`): syevd, then syevr, then syev."""
    return _eigh_any(a, False, "symmetric eigendecomposition")


def eigvalsh(a) -> np.ndarray:
    """Ascending eigenvalues of symmetric ``a (..., n, n)``: syevd, then syevr, then syev."""
    return _eigh_any(a, True, "symmetric eigenvalues")
