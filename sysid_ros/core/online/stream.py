"""A live joint-state stream as arrays: the one stream policy of the nodes that read joint states
(``estimator``, ``collision_monitor``) and, through the same rules in
:mod:`~sysid_ros.core.data.stream_time`, of the bag reader the offline replay starts from.

::

    JointMessage ─► StampPolicy ─► JointColumns ─► torque map ─► StreamBatch (t, q, q̇, τ)
    (names, arrays,  header stamp   model's joints   τ = scale ·    refused messages as
     stamp, receipt) or receipt     by name, lengths  effort + offset one line each

A node converts each message to a :class:`JointMessage` (plain values: no ROS type comes in here)
and hands a batch of them to :meth:`JointStream.batch`; what comes back goes to an
:class:`~sysid_ros.core.online.session.OnlineSession` (or a collision monitor) as it is.
:func:`load_prior` reads the prior a target starts from (the nodes' ``prior`` parameter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sysid_ros.core.data.columns import joint_columns, missing_joints_line
from sysid_ros.core.data.stream_time import StampPolicy
from sysid_ros.core.errors import DataError
from sysid_ros.core.model.layout import BODY_FIELDS
from sysid_ros.core.model.robot import RobotModel
from sysid_ros.core.result_file import ResultFile

__all__ = ["PRIORS", "JointColumns", "JointMessage", "JointStream", "StreamBatch", "load_prior"]

log = logging.getLogger(__name__)

#: the ``prior`` values that name no file: the target's own default prior
PRIORS: tuple[str, ...] = ("nominal", "uninformative", "")


@dataclass(frozen=True)
class JointMessage:
    """One joint-state message as plain values: ``names`` of its joints and, in that order,
    ``position`` [rad], ``velocity`` [rad/s] (may be empty) and ``effort`` (joint torque [N·m], or
    what the torque map turns into one); ``stamp`` [ns] its header stamp, ``received`` [ns] the
    time it was received (the reader's clock)."""

    names: tuple[str, ...]
    position: Sequence[float]
    velocity: Sequence[float]
    effort: Sequence[float]
    stamp: int
    received: int


class JointColumns:
    """Where the model's joints ``joint_names`` are in a message naming ``names`` (any order, other
    joints ignored: the one name → column map, :func:`~sysid_ros.core.data.columns.joint_columns`,
    as for a bag or a CSV file), cached per name tuple. A message that lacks some of them, or whose
    arrays do not have one value per name, is refused with one line saying what was expected and
    what came."""

    def __init__(self, joint_names: Sequence[str]) -> None:
        self.joint_names = tuple(joint_names)
        self._cache: dict[tuple[str, ...], np.ndarray | None] = {}

    def columns(self, names: tuple[str, ...]) -> np.ndarray | None:
        """Indices ``(n,)`` of the model's joints in ``names`` (None: some are missing)."""
        cols = self._cache.get(names, False)
        if cols is False:
            cols = (None if missing_joints_line(self.joint_names, names) is not None
                    else np.array(joint_columns(self.joint_names, names, ""), dtype=int))
            self._cache[names] = cols
        return cols

    def refusal(self, msg: JointMessage, *, velocity: bool = False) -> str | None:
        """Why ``msg`` cannot be used (None: it can); ``velocity``: velocities are required."""
        names, n = msg.names, len(msg.names)
        if self.columns(names) is None:
            return f"joint state rejected: {missing_joints_line(self.joint_names, names)}"
        lengths = [len(msg.position), len(msg.effort)] + ([len(msg.velocity)] if velocity else [])
        if all(k == n for k in lengths):
            return None
        arrays = "positions, velocities and efforts" if velocity else "positions and efforts"
        return (f"joint state rejected: expected {arrays} for the {n} names {list(names)}, got "
                f"{', '.join(map(str, lengths))}")


@dataclass(frozen=True)
class StreamBatch:
    """The usable messages of one batch in the model's joint order: ``ns (K,)`` [ns, int64] data
    times (:attr:`t` the same in seconds), ``q, tau (K, n)``, ``dq (K, n)`` or None (some message
    came without velocities: the session differentiates); ``refused``: one line per message left
    out (counted by the caller)."""

    ns: np.ndarray
    q: np.ndarray
    dq: np.ndarray | None
    tau: np.ndarray
    refused: tuple[str, ...]

    @property
    def t(self) -> np.ndarray:
        return self.ns * 1e-9

    def __len__(self) -> int:
        return len(self.ns)


class JointStream:
    """One joint-state stream read for a model with joints ``joint_names``: data times by the one
    :class:`~sysid_ros.core.data.stream_time.StampPolicy`, columns by :class:`JointColumns`, effort to
    joint torque by ``τ = scale · effort + offset`` (``(n,)`` each, model order; default 1 and 0).
    ``velocity``: messages without velocities are refused (else they make the batch's ``dq``
    None). ``where`` and ``warn`` name the stream and take the policy's warning.

    :attr:`progress_ns` [ns]: the data time of the newest message timed (0 while a first message
    stamped 0 is held; -1 before any): how far the stream has been read."""

    def __init__(self, joint_names: Sequence[str], *, scale=None, offset=None, velocity: bool = False,
                 where: str = "joint_states", warn: Callable[[str], None] | None = None) -> None:
        self.velocity = velocity
        self.stamps: StampPolicy[JointMessage] = StampPolicy(where, warn)
        self.progress_ns = -1
        self.configure(joint_names, scale=scale, offset=offset)

    def configure(self, joint_names: Sequence[str], *, scale=None, offset=None) -> None:
        """Another model's joints or torque map (the stream itself goes on: stamps, progress)."""
        columns = JointColumns(joint_names)
        n = len(columns.joint_names)
        scale = np.ones(n) if scale is None else np.asarray(scale, dtype=float)
        offset = np.zeros(n) if offset is None else np.asarray(offset, dtype=float)
        if scale.shape != (n,) or offset.shape != (n,):
            raise DataError(f"expected a torque scale and offset of shape ({n},), got "
                            f"{scale.shape} and {offset.shape}")
        self.columns, self.scale, self.offset = columns, scale, offset

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.columns.joint_names

    def reset(self) -> None:
        """A new stream: the stamp policy starts over (progress is kept: data time only grows)."""
        self.stamps.reset()

    def batch(self, messages: Iterable[JointMessage], *, final: bool = False) -> StreamBatch:
        """The messages received since the last batch, in arrival order, as arrays; ``final``: the
        stream has ended (a held first message stamped 0 is a sample at t = 0)."""
        timed = self.stamps.times((m, m.stamp, m.received) for m in messages)
        if final:
            timed = self.stamps.release() + timed
        t, q, dq, tau, refused = [], [], [], [], []
        velocities = True
        for msg, ns in timed:
            self.progress_ns = max(self.progress_ns, ns)
            why = self.columns.refusal(msg, velocity=self.velocity)
            if why is not None:
                refused.append(why)
                continue
            cols = self.columns.columns(msg.names)
            t.append(ns)
            q.append(np.asarray(msg.position, dtype=float)[cols])
            tau.append(self.scale * np.asarray(msg.effort, dtype=float)[cols] + self.offset)
            if velocities and len(msg.velocity) == len(msg.names):
                dq.append(np.asarray(msg.velocity, dtype=float)[cols])
            else:
                velocities = False  # one message without velocities: differentiate the batch
        if self.stamps.holding:
            self.progress_ns = max(self.progress_ns, 0)
        n = len(self.joint_names)
        if not t:
            empty = np.empty((0, n))
            return StreamBatch(np.empty(0, dtype=np.int64), empty, None, empty, tuple(refused))
        return StreamBatch(np.array(t, dtype=np.int64), np.array(q), np.array(dq) if velocities else None,
                           np.array(tau), tuple(refused))


def load_prior(model: RobotModel, kind: str, prior: str) -> np.ndarray | None:
    """The prior θ a target starts from, by the nodes' ``prior`` parameter: ``nominal``,
    ``uninformative`` or ``""`` give None (the target's own default: the model's values for an
    arm, an uninformative body for a payload); else the exported parameters of a ``result.json``
    (batch or online): for an arm (``kind == "arm"``) written over the model's values
    (:meth:`~sysid_ros.core.result_file.ResultFile.model_parameters`), for a payload its 10 ``payload.*``
    values. Raises :class:`~sysid_ros.core.errors.SysIdError` naming the file and what it lacks."""
    if prior in PRIORS:
        return None
    path = Path(prior).expanduser()
    if not path.is_file():
        raise DataError(f"prior must be 'nominal', 'uninformative' or a result.json path, got {prior!r}")
    if kind == "arm":
        return ResultFile.model_parameters(model, path)
    values = ResultFile.exported_values(path)
    names = [f"payload.{f}" for f in BODY_FIELDS]
    missing = [name for name in names if name not in values]
    if missing:
        raise DataError(f"{path}: expected a payload's exported parameters {names}, missing {missing}")
    return np.array([values[name] for name in names], dtype=float)
