"""Base-parameter reductions kept on disk, keyed by what they are computed from.

A reduction (:mod:`.base_params`) is deterministic given the model's kinematic structure (bodies,
joints, gravity, which bodies and joint terms are identified, the Stribeck and sigmoid shapes of
the joint-term columns), the random states it is computed on (joint ranges, ``qpos0``, seed and
sample count) and the code that computes it. It does not depend on the inertial values: the
regressor is linear in them. Computing one costs the compiled regressor's set-up (~1-2 s of CPU in
a fresh process: numba's import, its CPU target, the kernels' cache); reading it back costs
milliseconds. So a node or command that needs a model's base parameters reads them from here when
the same reduction was computed before, by any process.

The key is a SHA-256 of all of the above, of NumPy's version and of the source text of the modules
that compute it (:data:`SOURCES`), so an edit of the regressor or of the reduction is a new key,
never a stale result. Entries are ``.npz`` files of arrays only (no pickles), written atomically
(temporary file, then rename): readers never see half a file; two processes storing the same key
store the same values. An entry that cannot be read (truncated, foreign, another layout) is
computed again and replaced; a folder that cannot be written is only skipped (logged at debug
level): the cache saves time, it is never needed.

Folder: ``$SYSID_CACHE_DIR``, else ``$XDG_CACHE_HOME/sysid_ros``, else ``~/.cache/sysid_ros``;
entries under its ``base_params/``. Removing the folder is always safe.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sysid_ros.core.model.robot import RobotModel

__all__ = ["SOURCES", "cache_dir", "cached_arrays", "structure_key"]

log = logging.getLogger(__name__)

#: the modules whose code a reduction comes from (their text is part of every key)
SOURCES = ("base_params.py", "base_cache.py", "regressor.py", "newton_euler.py", "kinematics.py",
           "spatial.py")
#: bump when the stored layout changes
FORMAT = "1"


def cache_dir() -> Path:
    """The cache's folder (not created here)."""
    explicit = os.environ.get("SYSID_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sysid_ros"


def _sources_digest() -> bytes:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode())
        try:
            digest.update((here / name).read_bytes())
        except OSError:  # (not shipped as source: the key still differs from a source tree's)
            digest.update(b"?")
    return digest.digest()


def structure_key(model: RobotModel, what: Iterable[object]) -> str:
    """SHA-256 (hex) of everything a reduction of ``model`` depends on; ``what`` names the
    reduction and its options (e.g. ``("torque", n_samples, seed, rtol)``)."""
    digest = hashlib.sha256()

    def add(tag: str, value: object) -> None:
        digest.update(tag.encode() + b"=")
        if isinstance(value, str):
            digest.update(value.encode())
        else:
            arr = np.ascontiguousarray(np.asarray(value, dtype=float))
            digest.update(str(arr.shape).encode() + arr.tobytes())
        digest.update(b";")

    add("format", FORMAT)
    add("numpy", np.__version__)
    digest.update(_sources_digest())
    add("what", repr(tuple(what)))
    add("nq_nv", [model.nq, model.nv])
    add("gravity", model.gravity)
    add("qpos0", model.mj.qpos0)
    for b in model.bodies:
        add("body", [b.id, b.parent, *b.joints, -1, float(b.moving)])
        add("body_pose", np.concatenate((b.pos, b.rot.ravel())))
    for j in model.joints:
        add("joint", j.type)
        add("joint_adr", [j.body, j.qpos_adr, j.dof_adr, j.qpos0])
        add("joint_frame", np.concatenate((j.axis, j.pos)))
        add("joint_range", j.range if j.range is not None else [np.nan, np.nan])
    add("param_bodies", model.param_bodies)
    add("param_names", "\n".join(model.param_names))
    add("joint_terms", ",".join(model.joint_terms))
    add("term_dofs", model.term_dofs)
    add("term_columns", model.term_columns)
    add("stribeck_velocity", model.stribeck_velocity)
    add("sigmoid_shape", model.sigmoid_shape)
    return digest.hexdigest()


def _path(key: str) -> Path:
    return cache_dir() / "base_params" / f"{key}.npz"


def _load(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        log.debug("base-parameter cache entry %s unreadable (%s): computed again", path, exc)
        return None
    stored = arrays.get("param_names")
    if stored is None or tuple(str(n) for n in stored) != names:
        log.debug("base-parameter cache entry %s is for other parameters: computed again", path)
        return None
    return arrays


def _store(path: Path, arrays: dict[str, np.ndarray]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.stem[:16] + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.debug("base-parameter cache not written (%s): %s", path, exc)


def cached_arrays(key: str, names: tuple[str, ...],
                  compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays stored under ``key`` (their ``param_names`` must equal ``names``), else
    ``compute()``'s, stored for next time. ``compute`` returns arrays only (no objects), with
    ``param_names`` among them."""
    path = _path(key)
    arrays = _load(path, names)
    if arrays is None:
        arrays = compute()
        _store(path, arrays)
    return arrays
