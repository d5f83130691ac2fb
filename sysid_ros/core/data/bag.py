"""rosbag2 bags (MCAP or sqlite3) read and written with the ``rosbags`` library.

Reading gives a :class:`~sysid_ros.core.data.dataset.Dataset` from ``sensor_msgs/JointState``
(position, velocity, effort = measured torque) and, when present, ``sysid_ros/MotorCommand``.
Writing is atomic: the bag is written under a temporary name beside the target and renamed into
place, so a half-written bag never carries the final name. A simulated run's true parameters go
into ``truth.json`` inside the bag directory (and are named in the bag's custom metadata).

Times: the one stamp policy of :mod:`~sysid_ros.core.data.stream_time` (as the nodes apply it live):
a message's time is its ``header.stamp``, 0 included; an *unstamped stream* (its first two
stamps 0: a driver that never stamps) takes the bag's log times (the recorder's receive times),
with a logged warning naming the topic. The same rule holds for ``MotorCommand``.

Recording (:class:`BagRecording`) and recovery: a recording lives in ``.<name>.partial-*/<name>``
beside its final path until :meth:`BagRecording.close` renames it into place. Its MCAP chunks are
flushed to the file as the recording goes (:meth:`BagRecording.flush`), so a recorder killed
with ``kill -9`` leaves a readable prefix: :func:`recover_bag` (``sysid bag recover PATH``)
rebuilds a complete bag at the final name from every complete message of that file. Finalising
that fails or is interrupted never deletes the staging folder (it stays recoverable).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sysid_ros.core.atomic import write_atomic
from sysid_ros.core.data import mcap_crc
from sysid_ros.core.data.cdr import read_joint_arrays
from sysid_ros.core.data.columns import ColumnMap
from sysid_ros.core.data.dataset import CommandLog, Dataset
from sysid_ros.core.data.effort_timing import BAG_KEY as EFFORT_LAG_BAG_KEY
from sysid_ros.core.data.effort_timing import META_KEY as EFFORT_LAG_META_KEY
from sysid_ros.core.data.stream_time import stream_times
from sysid_ros.core.errors import DataError
from sysid_ros.core.json_numbers import dumps_strict
from sysid_ros.core.resources import find_share_file

if TYPE_CHECKING:  # rosbags is imported where a bag is read or written: ~0.3 s of a CSV command
    from rosbags.rosbag2 import Reader
    from rosbags.typesys.store import Typestore

JOINT_STATES = "/joint_states"
MOTOR_COMMAND = "/motor_command"
#: file suffixes read as delimited text (CSV) rather than as a bag
CSV_SUFFIXES = (".csv", ".tsv", ".txt")
TRUTH_FILE = "truth.json"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
MOTOR_COMMAND_TYPE = "sysid_ros/msg/MotorCommand"
PARAMETER_ESTIMATE_TYPE = "sysid_ros/msg/ParameterEstimate"
Storage = Literal["mcap", "sqlite3"]


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    """ROS 2 Kilted message types plus this package's own messages (from ``msg/*.msg``)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name in ("MotorCommand", "ParameterEstimate"):
        text = find_share_file(f"msg/{name}.msg").read_text(encoding="utf-8")
        types.update(get_types_from_msg(text, f"sysid_ros/msg/{name}"))
    store.register(types)
    return store


log = logging.getLogger(__name__)


#: CDR encapsulation identifiers (second byte) of plain CDR / XCDR2, big and little endian
_CDR_KINDS = {0x00: ">", 0x01: "<", 0x06: ">", 0x07: "<"}


def header_stamp_ns(data: bytes | memoryview) -> int | None:
    """The ``std_msgs/Header`` stamp [ns] of a serialised message whose first field is a header,
    read straight from the CDR bytes (4-byte encapsulation header, then int32 sec and uint32
    nanosec in the byte order the header names); ``None`` if the bytes are not plain CDR."""
    if len(data) < 12 or data[0] != 0 or data[1] not in _CDR_KINDS:
        return None
    sec, nanosec = struct.unpack_from(_CDR_KINDS[data[1]] + "iI", data, 4)
    return sec * 1_000_000_000 + nanosec


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
              truth: dict[str, Any] | None = None, overwrite: bool = False,
              custom_data: dict[str, str] | None = None) -> Path:
    """Write a rosbag2 bag directory atomically. Returns the final path. ``custom_data``: entries
    of its metadata (e.g. the effort lag, :data:`~sysid_ros.core.data.effort_timing.BAG_KEY`).

    Raises :class:`DataError` if ``path`` exists (unless ``overwrite``); on any failure the
    temporary directory is removed and nothing is left under ``path``.
    """
    path = Path(path).absolute()
    if path.exists() and not overwrite:
        raise DataError(f"{path} exists; choose another output or remove it")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    tmp_bag = staging / path.name
    from rosbags.rosbag2 import StoragePlugin, Writer

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
            for key, value in (custom_data or {}).items():
                writer.set_custom_data(key, str(value))
        mcap_crc.seal_bag(tmp_bag)
        if truth is not None:
            (tmp_bag / TRUTH_FILE).write_text(dumps_strict(truth, indent=2) + "\n", encoding="utf-8")
        if path.exists():
            shutil.rmtree(path)
        # a bag is a folder renamed into place whole (not core.atomic's files): see core/atomic.py
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
             command_topic: str = MOTOR_COMMAND, commands: bool = True) -> Dataset:
    """Read joint states (and commands when recorded and ``commands``: only the IV methods use
    them) from a bag directory (MCAP or sqlite3).

    Raises :class:`DataError` for a missing or unreadable bag, a missing topic (listing the
    topics present), inconsistent joint names or non-increasing times. Gaps are not errors:
    :meth:`Dataset.gaps` names them and the batch methods split the data there. Samples with a
    non-finite position or torque (a motor that missed its reply in that cycle) are skipped with
    a warning saying how many: they become gaps too.
    """
    path = Path(path)
    if not path.exists():
        if partial_folders(path):
            raise DataError(f"{path}: not found, but its recording was interrupted; run "
                            f"`sysid bag recover {path}`")
        raise DataError(f"expected a rosbag2 bag directory, got {str(path)!r} (not found)")
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.errors import ReaderError
    from rosbags.serde import SerdeError

    store = typestore()
    mcap_crc.verify_bag(path)
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
            cmd_conn = topics.get(command_topic)
            if not (commands and cmd_conn is not None and cmd_conn.msgtype == MOTOR_COMMAND_TYPE):
                cmd_conn = None
            # one pass over the bag for both topics (each pass parses every record of its chunks)
            messages = _topic_messages(reader, [js_conn] + ([cmd_conn] if cmd_conn else []))
            states = _read_states(*messages[js_conn.id], js_conn.msgtype, store, path,
                                  joint_states_topic)
            command = None
            truth_estimate = _recorded_truth(reader, store)
            if cmd_conn is not None:
                command = _read_commands(*messages[cmd_conn.id], cmd_conn.msgtype, store,
                                         states["names"], states["t0_ns"], path, command_topic)
    except (ReaderError, FileNotFoundError) as exc:
        raise DataError(f"{path}: not a readable rosbag2 bag ({exc})") from exc
    except (SerdeError, OverflowError, ValueError, KeyError, IndexError, struct.error,
            UnicodeDecodeError) as exc:  # a file without CRCs whose bytes are corrupt
        raise DataError(f"{path}: corrupt bag: decoding failed ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    truth = None
    truth_path = path / TRUTH_FILE
    if truth_path.is_file():
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
    elif truth_estimate is not None:
        truth = truth_from_estimate(truth_estimate.names, truth_estimate.values)
    # what the recorder was told about the effort's timing (core.data.effort_timing)
    declared = bag_custom_data(path).get(EFFORT_LAG_BAG_KEY)
    meta = {} if declared is None else {EFFORT_LAG_META_KEY: declared}
    ds = Dataset(states["t"], states["names"], states["q"], states["dq"], states["tau"],
                 source=str(path), command=command, truth=truth, meta=meta)
    where = f"{path}:{joint_states_topic}"
    measured, skipped = ds.without_unmeasured()
    if skipped:
        if len(measured) == 0:
            raise DataError(f"{where}: every one of the {skipped} samples has a non-finite position or "
                            "torque")
        logging.getLogger(__name__).warning(
            "%s: %d of %d samples skipped (non-finite position or torque: missed motor replies); "
            "they leave gaps where the data is split", where, skipped, len(ds))
    return measured.validate(topic=where)


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


def _topic_messages(reader: Reader, conns: list) -> dict[int, tuple[list[bytes], np.ndarray]]:
    """Per connection id: its serialised messages and their log times [ns], in the bag's order."""
    raws: dict[int, list[bytes]] = {c.id: [] for c in conns}
    log_times: dict[int, list[int]] = {c.id: [] for c in conns}
    for conn, ns, raw in reader.messages(connections=conns):
        raws[conn.id].append(raw)
        log_times[conn.id].append(ns)
    return {k: (raws[k], np.array(log_times[k], dtype=np.int64)) for k in raws}


def _read_states(raws: list[bytes], log_times: np.ndarray, msgtype: str, store: Typestore, path: Path,
                 topic: str) -> dict[str, Any]:
    if not raws:
        raise DataError(f"{path}:{topic}: the topic has no messages")
    groups = read_joint_arrays(raws, store, msgtype)  # position, velocity, effort
    names = groups[0].names
    n = len(names)
    for g in groups:  # ordered by their first sample: the first bad sample is named
        if g.names != names:
            raise DataError(f"{path}:{topic}: sample {g.index[0]} names joints {list(g.names)}, the "
                            f"first sample named {list(names)}")
        if g.arrays[0].shape[1] != n or g.arrays[2].shape[1] != n:
            raise DataError(f"{path}:{topic}: sample {g.index[0]} has {g.arrays[0].shape[1]} "
                            f"positions and {g.arrays[2].shape[1]} efforts for {n} joints")
    stamps = np.empty(len(raws), dtype=np.int64)
    q, dq, tau = (np.full((len(raws), n), np.nan) for _ in range(3))
    for g in groups:
        stamps[g.index], q[g.index], tau[g.index] = g.stamps, g.arrays[0], g.arrays[2]
        if g.arrays[1].shape[1] == n:
            dq[g.index] = g.arrays[1]
    stamps = np.array(stream_times(stamps, log_times, f"{path}:{topic}"), dtype=np.int64)
    order = np.arange(stamps.size)
    if np.any(np.diff(stamps) < 0) and np.unique(stamps).size == stamps.size:
        # delivered out of order (a late-joining reliable reader gets the live sample before the
        # repaired ones): every stamp is distinct, so the stamps give the order. Repeated stamps
        # are not reordered: validation names them.
        order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    return {"t": (stamps - stamps[0]) * 1e-9, "names": names, "q": q[order], "dq": dq[order],
            "tau": tau[order], "t0_ns": int(stamps[0])}


def _read_commands(raws: list[bytes], log_times: np.ndarray, msgtype: str, store: Typestore,
                   joint_names: tuple[str, ...], t0_ns: int, path: Path, topic: str) -> CommandLog | None:
    """Commands on the joint states' clock (``t0_ns`` = time of the first joint state), matched by
    joint name. Messages a robot would refuse — not naming every joint, arrays of the wrong
    length, non-finite targets — are skipped and counted (a warning names how many and why); if
    no message is usable, :class:`DataError` says why."""
    total = len(raws)
    stamps = np.zeros(total, dtype=np.int64)
    values = np.full((total, 5, len(joint_names)), np.nan)  # q_ref, dq_ref, tau_ff, kp, kd
    usable = np.zeros(total, dtype=bool)
    skipped: dict[str, list[int]] = {}  # why → [first sample, count]

    def skip(why: str, index: np.ndarray) -> None:
        if index.size:
            first, count = skipped.get(why, [total, 0])
            skipped[why] = [min(first, int(index[0])), count + int(index.size)]

    for g in read_joint_arrays(raws, store, msgtype) if raws else []:
        names = list(g.names)
        n = len(names)
        missing = [j for j in joint_names if j not in names]
        if missing:
            skip(f"not naming joints {missing}", g.index)
            continue
        if not all(a.shape[1] == n for a in g.arrays[:3]):
            skip("arrays of the wrong length", g.index)
            continue
        cols = np.array([names.index(j) for j in joint_names])
        gains = [a if a.shape[1] == n else np.full((g.index.size, n), np.nan) for a in g.arrays[3:5]]
        v = np.stack([*g.arrays[:3], *gains], axis=1)[:, :, cols]  # (m, 5, joints)
        finite = np.all(np.isfinite(v[:, :3]), axis=(1, 2))
        skip("non-finite targets", g.index[~finite])
        values[g.index[finite]], stamps[g.index], usable[g.index[finite]] = v[finite], g.stamps, True
    if skipped:
        reasons = ", ".join(f"{count} {why}" for why, (_, count)
                            in sorted(skipped.items(), key=lambda item: item[1][0]))
        if not usable.any():
            raise DataError(f"{path}:{topic}: no usable command: {reasons}")
        logging.getLogger(__name__).warning("%s:%s: skipped commands: %s", path, topic, reasons)
    if not usable.any():
        return None
    rows = np.flatnonzero(usable)
    times = np.array(stream_times(stamps[rows], log_times[rows], f"{path}:{topic}"), dtype=np.int64)
    order = np.argsort(times, kind="stable")
    t, v = times[order], values[rows[order]]  # (M, 5, n)
    return CommandLog(t=(t - t0_ns) * 1e-9, q_ref=v[:, 0], dq_ref=v[:, 1], tau_ff=v[:, 2],
                      kp=v[:, 3], kd=v[:, 4])


def read_data(path: str | Path, *, joint_states_topic: str = JOINT_STATES,
              command_topic: str = MOTOR_COMMAND, joint_names: Sequence[str] | None = None,
              columns: ColumnMap | None = None, time_unit: str = "s", commands: bool = True
              ) -> Dataset:
    """A bag directory (MCAP/sqlite3) or a delimited text file, ``.csv``, ``.tsv`` or ``.txt``
    (see :func:`~sysid_ros.core.data.dataset.read_csv`; ``columns`` and ``time_unit`` are its,
    refused for a bag; ``commands=False`` leaves a bag's command topic unread)."""
    path = Path(path)
    if path.suffix.lower() in CSV_SUFFIXES:
        from sysid_ros.core.data.dataset import read_csv

        return read_csv(path, joint_names=joint_names, columns=columns, time_unit=time_unit)
    if columns is not None or time_unit != "s":
        raise DataError(f"{path}: a column map and a time unit apply to CSV files "
                        f"({', '.join(CSV_SUFFIXES)}); a bag's topics carry their names and stamps")
    return read_bag(path, joint_states_topic=joint_states_topic, command_topic=command_topic,
                    commands=commands)


def bag_custom_data(path: str | Path) -> dict[str, str]:
    """The ``custom_data`` of a bag's ``metadata.yaml`` (e.g. the recorder's loss counts)."""
    from ruamel.yaml import YAML

    meta = Path(path) / "metadata.yaml"
    if not meta.is_file():
        raise DataError(f"{path}: no metadata.yaml (not a finished rosbag2 bag)")
    info = YAML(typ="safe").load(meta.read_text(encoding="utf-8")) or {}
    return dict(info.get("rosbag2_bagfile_information", {}).get("custom_data") or {})


PARTIAL_STATE = "recording.json"  # loss counts of a recording in progress, beside its partial bag


def partial_folders(path: str | Path) -> list[Path]:
    """The staging folders ``.<name>.partial-*`` of recordings of ``path`` left unfinished."""
    path = Path(path).absolute()
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.glob(f".{path.name}.partial-*") if p.is_dir())


class BagRecording:
    """A rosbag2 bag written message by message (a recorder), finalised atomically.

    Messages go into ``.<name>.partial-*/<name>`` beside ``path``; :meth:`close` finishes the bag
    (metadata written) and renames it to ``path``: a half-written bag never carries the final
    name. :meth:`flush` puts everything written so far into the file (MCAP: the pending chunk is
    closed), so it survives the process being killed (:func:`recover_bag`). If finishing fails or
    is interrupted, the staging folder stays (recoverable); only :meth:`abort` (an explicit
    throw-away) removes it. Messages are CDR bytes as they come off the wire (``raw``
    subscriptions), timestamps in nanoseconds.
    """

    def __init__(self, path: str | Path, *, storage: Storage = "mcap") -> None:
        self.path = Path(path).absolute()
        if self.path.exists():
            raise DataError(f"{self.path} exists; choose another output or remove it")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.partial-", dir=self.path.parent))
        self._tmp = self._staging / self.path.name
        from rosbags.rosbag2 import StoragePlugin, Writer

        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self._tmp, version=9, storage_plugin=plugin)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.closed = False
        self._custom: dict[str, str] = {}  # set_metadata's entries, for the partial state
        self._state: dict[str, Any] = {}   # the last save_state's

    @property
    def staging(self) -> Path:
        """The folder holding the bag until it is finished."""
        return self._staging

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

    def flush(self) -> None:
        """Put every message written so far into the file (the OS has it: a killed process
        loses nothing of it). MCAP: the pending chunk is closed; sqlite3: committed."""
        storage = self._writer.storage
        if storage is None:
            return
        chunk = getattr(storage, "chunk", None)
        if chunk is not None and chunk.bio.tell():
            storage.close_chunk()
        if hasattr(storage, "bio"):
            storage.bio.flush()
        elif hasattr(storage, "conn"):
            storage.conn.commit()

    def set_metadata(self, key: str, value: str) -> None:
        """A ``custom_data`` entry of the bag's metadata (written when the bag is closed; kept in
        the partial state at once, so that a recording killed before it closed recovers it)."""
        self._writer.set_custom_data(key, str(value))
        self._custom[key] = str(value)
        self.save_state(self._state)

    def save_state(self, state: dict[str, Any]) -> None:
        """Keep ``state`` (e.g. loss counts so far) beside the partial bag for :func:`recover_bag`,
        with the metadata entries set so far (``custom_data``)."""
        self._state = dict(state)
        write_atomic(self._staging / PARTIAL_STATE, dumps_strict({**state, "custom_data": self._custom}))

    def close(self) -> Path:
        """Finish the bag and move it to its final name. Returns the path.

        On any failure or interruption (``KeyboardInterrupt`` included) the staging folder is
        left as it is and the error says where: ``sysid bag recover`` rebuilds the bag from it."""
        if self.closed:
            return self.path
        self.closed = True
        try:
            self._writer.close()
            mcap_crc.seal_bag(self._tmp)
            # the bag folder renamed whole; on failure the staging stays for `sysid bag recover`
            # (the recorder's own protocol, not core.atomic's all-or-nothing files)
            os.replace(self._tmp, self.path)
        except BaseException:
            log.error("bag %s not finished: its data stays in %s; run `sysid bag recover %s`",
                      self.path, self._staging, self.path)
            raise
        shutil.rmtree(self._staging, ignore_errors=True)  # only the loss state is left there
        return self.path

    def abort(self) -> None:
        """Drop the bag (an explicit throw-away, e.g. nothing was recorded): nothing is left."""
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
