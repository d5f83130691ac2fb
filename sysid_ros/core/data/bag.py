"""rosbag2 bags (MCAP or sqlite3) read and written with the ``rosbags`` library.

Reading gives a :class:`~sysid_ros.core.data.dataset.Dataset` from ``sensor_msgs/JointState``
(position, velocity, effort = measured torque) and, when present, ``sysid_ros/MotorCommand``.
Writing is atomic: the bag is written under a temporary name beside the target and renamed into
place, so a half-written bag never carries the final name. A simulated run's true parameters go
into ``truth.json`` inside the bag directory (and are named in the bag's custom metadata).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.errors import ReaderError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.errors import DataError
from sysid_ros.resources import find_share_file

JOINT_STATES = "/joint_states"
MOTOR_COMMAND = "/motor_command"
TRUTH_FILE = "truth.json"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
MOTOR_COMMAND_TYPE = "sysid_ros/msg/MotorCommand"
PARAMETER_ESTIMATE_TYPE = "sysid_ros/msg/ParameterEstimate"
Storage = Literal["mcap", "sqlite3"]


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    """ROS 2 Kilted message types plus this package's own messages (from ``msg/*.msg``)."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name in ("MotorCommand", "ParameterEstimate"):
        text = find_share_file(f"msg/{name}.msg").read_text(encoding="utf-8")
        types.update(get_types_from_msg(text, f"sysid_ros/msg/{name}"))
    store.register(types)
    return store


def _stamp_ns(msg: Any, fallback_ns: int) -> int:
    stamp = msg.header.stamp
    ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
    return ns if ns > 0 else fallback_ns


def _time(ns: int) -> Any:
    t = typestore().types["builtin_interfaces/msg/Time"]
    return t(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def _header(ns: int, frame_id: str = "") -> Any:
    return typestore().types["std_msgs/msg/Header"](stamp=_time(ns), frame_id=frame_id)


def joint_state_message(ns: int, names: Sequence[str], q, dq, tau) -> Any:
    """A ``sensor_msgs/JointState`` (rosbags object) stamped at ``ns`` nanoseconds."""
    js = typestore().types[JOINT_STATE_TYPE]
    return js(header=_header(ns), name=list(names), position=np.asarray(q, dtype=float),
              velocity=np.asarray(dq, dtype=float), effort=np.asarray(tau, dtype=float))


def motor_command_message(ns: int, names: Sequence[str], q_ref, dq_ref, tau_ff, kp, kd) -> Any:
    """A ``sysid_ros/MotorCommand`` (rosbags object) stamped at ``ns`` nanoseconds."""
    mc = typestore().types[MOTOR_COMMAND_TYPE]
    arr = [np.asarray(x, dtype=float) for x in (q_ref, dq_ref, tau_ff, kp, kd)]
    return mc(header=_header(ns), name=list(names), position=arr[0], velocity=arr[1], effort=arr[2],
              kp=arr[3], kd=arr[4])


@dataclass(frozen=True)
class TopicData:
    """Messages of one topic to write: ``(timestamp_ns, rosbags message)`` pairs."""

    topic: str
    msgtype: str
    messages: Iterable[tuple[int, Any]]


def write_bag(path: str | Path, topics: Sequence[TopicData], *, storage: Storage = "mcap",
              truth: dict[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a rosbag2 bag directory atomically. Returns the final path.

    Raises :class:`DataError` if ``path`` exists (unless ``overwrite``); on any failure the
    temporary directory is removed and nothing is left under ``path``.
    """
    path = Path(path).absolute()
    if path.exists() and not overwrite:
        raise DataError(f"{path} exists; choose another output or remove it")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    tmp_bag = staging / path.name
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    store = typestore()
    try:
        with Writer(tmp_bag, version=9, storage_plugin=plugin) as writer:
            for td in topics:
                conn = writer.add_connection(td.topic, td.msgtype, typestore=store)
                for ns, msg in td.messages:
                    writer.write(conn, int(ns), store.serialize_cdr(msg, td.msgtype))
            if truth is not None:
                writer.set_custom_data("sysid_ros.truth", TRUTH_FILE)
        if truth is not None:
            (tmp_bag / TRUTH_FILE).write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp_bag, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def dataset_topics(dataset: Dataset, *, joint_states_topic: str = JOINT_STATES,
                   command_topic: str = MOTOR_COMMAND) -> list[TopicData]:
    """The JointState (and MotorCommand, when the dataset has commands) topics of a dataset."""
    names = dataset.joint_names

    def states():
        for k in range(len(dataset)):
            ns = round(dataset.t[k] * 1e9)
            yield ns, joint_state_message(ns, names, dataset.q[k], dataset.dq[k], dataset.tau[k])

    out = [TopicData(joint_states_topic, JOINT_STATE_TYPE, states())]
    cmd = dataset.command
    if cmd is not None:
        def commands():
            for k in range(len(cmd.t)):
                ns = round(cmd.t[k] * 1e9)
                yield ns, motor_command_message(ns, names, cmd.q_ref[k], cmd.dq_ref[k],
                                                cmd.tau_ff[k], cmd.kp[k], cmd.kd[k])

        out.append(TopicData(command_topic, MOTOR_COMMAND_TYPE, commands()))
    return out


def read_bag(path: str | Path, *, joint_states_topic: str = JOINT_STATES,
             command_topic: str = MOTOR_COMMAND) -> Dataset:
    """Read joint states (and commands when recorded) from a bag directory (MCAP or sqlite3).

    Raises :class:`DataError` for a missing or unreadable bag, a missing topic (listing the
    topics present), inconsistent joint names, non-increasing times, gaps or non-finite values.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"expected a rosbag2 bag directory, got {str(path)!r} (not found)")
    store = typestore()
    try:
        with Reader(path) as reader:
            topics = {c.topic: c for c in reader.connections}
            if joint_states_topic not in topics:
                raise DataError(f"{path}: no topic {joint_states_topic!r}; the bag has "
                                f"{sorted(topics) or 'no topics'}")
            js_conn = topics[joint_states_topic]
            if js_conn.msgtype != JOINT_STATE_TYPE:
                raise DataError(f"{path}: {joint_states_topic!r} carries {js_conn.msgtype}, expected "
                                f"{JOINT_STATE_TYPE}")
            states = _read_states(reader, js_conn, store, path, joint_states_topic)
            command = None
            truth_estimate = _recorded_truth(reader, store)
            cmd_conn = topics.get(command_topic)
            if cmd_conn is not None and cmd_conn.msgtype == MOTOR_COMMAND_TYPE:
                command = _read_commands(reader, cmd_conn, store, states["names"], states["t0_ns"],
                                         path, command_topic)
    except (ReaderError, FileNotFoundError) as exc:
        raise DataError(f"{path}: not a readable rosbag2 bag ({exc})") from exc
    truth = None
    truth_path = path / TRUTH_FILE
    if truth_path.is_file():
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
    elif truth_estimate is not None:
        truth = truth_from_estimate(truth_estimate.names, truth_estimate.values)
    ds = Dataset(states["t"], states["names"], states["q"], states["dq"], states["tau"],
                 source=str(path), command=command, truth=truth)
    return ds.validate(topic=f"{path}:{joint_states_topic}")


def truth_from_estimate(names: Sequence[str], values: Sequence[float]) -> dict[str, Any]:
    """The ``truth.json`` form of a simulator's true-parameter message: ``parameters`` (name →
    value) and, when ``payload.<field>`` entries are present, ``payload.params`` (10 values)."""
    from sysid_ros.core.model.robot import BODY_FIELDS

    values_by_name = {str(n): float(v) for n, v in zip(names, values, strict=True)}
    truth: dict[str, Any] = {"parameters": {n: v for n, v in values_by_name.items()
                                            if not n.startswith("payload.")}, "payload": None}
    if all(f"payload.{f}" in values_by_name for f in BODY_FIELDS):
        truth["payload"] = {"params": [values_by_name[f"payload.{f}"] for f in BODY_FIELDS]}
    return truth


def _recorded_truth(reader: Reader, store: Typestore) -> Any | None:
    """The last ``ParameterEstimate`` with method "truth" recorded in the bag (a simulator's
    true parameters), or ``None``."""
    conns = [c for c in reader.connections if c.msgtype == PARAMETER_ESTIMATE_TYPE]
    if not conns:  # (an empty list would select every connection)
        return None
    found = None
    for conn, _, raw in reader.messages(connections=conns):
        msg = store.deserialize_cdr(raw, conn.msgtype)
        if msg.method == "truth":
            found = msg
    return found


def _read_states(reader: Reader, conn, store: Typestore, path: Path, topic: str) -> dict[str, Any]:
    times, q, dq, tau = [], [], [], []
    names: tuple[str, ...] | None = None
    for k, (_, ns, raw) in enumerate(reader.messages(connections=[conn])):
        msg = store.deserialize_cdr(raw, conn.msgtype)
        msg_names = tuple(msg.name)
        if names is None:
            names = msg_names
        elif msg_names != names:
            raise DataError(f"{path}:{topic}: sample {k} names joints {list(msg_names)}, the first "
                            f"sample named {list(names)}")
        n = len(names)
        if len(msg.position) != n or len(msg.effort) != n:
            raise DataError(f"{path}:{topic}: sample {k} has {len(msg.position)} positions and "
                            f"{len(msg.effort)} efforts for {n} joints")
        times.append(_stamp_ns(msg, ns))
        q.append(msg.position)
        tau.append(msg.effort)
        dq.append(msg.velocity if len(msg.velocity) == n else np.full(n, np.nan))
    if names is None:
        raise DataError(f"{path}:{topic}: the topic has no messages")
    stamps = np.array(times, dtype=np.int64)
    order = np.arange(stamps.size)
    if np.any(np.diff(stamps) < 0) and np.unique(stamps).size == stamps.size:
        # delivered out of order (a late-joining reliable reader gets the live sample before the
        # repaired ones): every stamp is distinct, so the stamps give the order. Repeated stamps
        # are not reordered: validation names them.
        order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    return {"t": (stamps - stamps[0]) * 1e-9, "names": names, "q": np.array(q, dtype=float)[order],
            "dq": np.array(dq, dtype=float)[order], "tau": np.array(tau, dtype=float)[order],
            "t0_ns": int(stamps[0])}


def _read_commands(reader: Reader, conn, store: Typestore, joint_names: tuple[str, ...], t0_ns: int,
                   path: Path, topic: str) -> CommandLog | None:
    """Commands on the joint states' clock (``t0_ns`` = time of the first joint state), matched by
    joint name. Messages a robot would refuse — not naming every joint, arrays of the wrong
    length, non-finite targets — are skipped and counted (a warning names how many and why); if
    no message is usable, :class:`DataError` says why."""
    rows: list[tuple[int, np.ndarray]] = []
    skipped: dict[str, int] = {}
    for _, ns, raw in reader.messages(connections=[conn]):
        msg = store.deserialize_cdr(raw, conn.msgtype)
        names = list(msg.name)
        n = len(names)
        missing = [j for j in joint_names if j not in names]
        if missing:
            skipped[f"not naming joints {missing}"] = skipped.get(f"not naming joints {missing}", 0) + 1
            continue
        if not all(len(a) == n for a in (msg.position, msg.velocity, msg.effort)):
            skipped["arrays of the wrong length"] = skipped.get("arrays of the wrong length", 0) + 1
            continue
        cols = np.array([names.index(j) for j in joint_names])
        gains = [np.asarray(g, dtype=float) if len(g) == n else np.full(n, np.nan)
                 for g in (msg.kp, msg.kd)]
        values = np.stack([np.asarray(msg.position), np.asarray(msg.velocity), np.asarray(msg.effort),
                           *gains])[:, cols]
        if not np.all(np.isfinite(values[:3])):
            skipped["non-finite targets"] = skipped.get("non-finite targets", 0) + 1
            continue
        rows.append((_stamp_ns(msg, ns), values))
    if skipped:
        reasons = ", ".join(f"{count} {why}" for why, count in skipped.items())
        if not rows:
            raise DataError(f"{path}:{topic}: no usable command: {reasons}")
        logging.getLogger(__name__).warning("%s:%s: skipped commands: %s", path, topic, reasons)
    if not rows:
        return None
    rows.sort(key=lambda r: r[0])
    t = np.array([r[0] for r in rows], dtype=np.int64)
    v = np.stack([r[1] for r in rows])  # (M, 5, n)
    return CommandLog(t=(t - t0_ns) * 1e-9, q_ref=v[:, 0], dq_ref=v[:, 1], tau_ff=v[:, 2],
                      kp=v[:, 3], kd=v[:, 4])


def read_data(path: str | Path, *, joint_states_topic: str = JOINT_STATES,
              command_topic: str = MOTOR_COMMAND, joint_names: Sequence[str] | None = None) -> Dataset:
    """A bag directory (MCAP/sqlite3) or a CSV file (see :func:`~sysid_ros.core.data.dataset.read_csv`)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        from sysid_ros.core.data.dataset import read_csv

        return read_csv(path, joint_names=joint_names)
    return read_bag(path, joint_states_topic=joint_states_topic, command_topic=command_topic)


class BagRecording:
    """A rosbag2 bag written message by message (a recorder), finalised atomically.

    Messages go into ``.<name>.partial-*/<name>`` beside ``path``; :meth:`close` finishes the bag
    (metadata written) and renames it to ``path``; :meth:`abort` (or an exception inside a
    ``with`` block) removes it: a half-written bag never carries the final name. Messages are
    CDR bytes as they come off the wire (``raw`` subscriptions), timestamps in nanoseconds.
    """

    def __init__(self, path: str | Path, *, storage: Storage = "mcap") -> None:
        self.path = Path(path).absolute()
        if self.path.exists():
            raise DataError(f"{self.path} exists; choose another output or remove it")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.partial-", dir=self.path.parent))
        self._tmp = self._staging / self.path.name
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self._tmp, version=9, storage_plugin=plugin)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.closed = False

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare ``topic`` of ROS type ``msgtype`` (e.g. ``sensor_msgs/msg/JointState``);
        :class:`DataError` if the type is unknown to the type store."""
        if topic in self._connections:
            return
        store = typestore()
        if msgtype not in store.fielddefs:
            raise DataError(f"cannot record {topic}: message type {msgtype} is unknown to the bag "
                            "type store (ROS 2 Kilted types and sysid_ros messages)")
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=store)
        self.counts[topic] = 0

    def write(self, topic: str, ns: int, data: bytes) -> None:
        """Append one serialised message of a declared topic at ``ns`` nanoseconds."""
        self._writer.write(self._connections[topic], int(ns), bytes(data))
        self.counts[topic] += 1

    def close(self) -> Path:
        """Finish the bag and move it to its final name. Returns the path."""
        if self.closed:
            return self.path
        try:
            self._writer.close()
            os.replace(self._tmp, self.path)
        finally:
            self.closed = True
            shutil.rmtree(self._staging, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        """Drop the bag: nothing is left behind."""
        if self.closed:
            return
        self.closed = True
        try:
            self._writer.close()
        except Exception:  # the bag is being thrown away
            pass
        shutil.rmtree(self._staging, ignore_errors=True)

    def __enter__(self) -> BagRecording:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
