"""Many serialised joint-array messages read at once: the header stamps, joint names and float64
arrays of a topic's CDR messages as numpy columns, without a Python object per message.

The messages read this way are those of a type ``std_msgs/Header header; string[] name;
float64[] a; float64[] b; ...`` (``sensor_msgs/JointState``, ``sysid_ros/MotorCommand``). In
plain little-endian CDR (OMG CDR as ROS 2 serialises it, encapsulation ``00 01``, offsets counted
from the end of the 4-byte encapsulation header) such a message is:

    int32 sec, uint32 nanosec                    stamp (offset 0)
    uint32 L, L bytes (NUL-terminated)           frame_id
    uint32 N, N × (align 4, uint32 L, L bytes)   name
    per array: align 4, uint32 count, then (if count > 0) align 8, count × float64

A topic's messages nearly always repeat one layout (same frame id, joint names, array lengths):
they have the same length and the same bytes everywhere but in the stamp and the float64
payloads. Those messages are stacked into one ``(M, length)`` byte array and their stamps and
arrays are read as strided views. Each layout's first message is also deserialised by
``rosbags`` and must give the same values, bit for bit; a layout that does not, a message of
another layout, big-endian data or a message type of another shape goes through ``rosbags``'
own deserialisation, one message at a time (the same values, only slower).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

log = logging.getLogger(__name__)

_LITTLE_ENDIAN_CDR = b"\x00\x01"
#: layouts read as stacked bytes per topic; messages of further layouts are read by rosbags
MAX_LAYOUTS = 16


@dataclass(frozen=True)
class MessageGroup:
    """Messages of one topic with the same joint names and array lengths: ``index (m,)`` their
    positions in the
    topic's message order, ``stamps (m,)`` header stamps [ns], ``arrays`` one ``(m, k_i)`` float64
    array per array field (``k_i`` that field's length in these messages)."""

    index: np.ndarray
    names: tuple[str, ...]
    stamps: np.ndarray
    arrays: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class _Layout:
    """Where one message's arrays are: ``arrays`` (byte offset, count) per field in the whole
    serialised message (encapsulation header included); ``fixed`` a mask of the bytes that make
    the layout (encapsulation kind, string lengths and characters, sequence counts), which every
    message of this layout repeats. Stamp, array values and padding (which serialisers may leave
    uninitialised) are free."""

    size: int
    names: tuple[str, ...]
    arrays: tuple[tuple[int, int], ...]
    fixed: np.ndarray


def joint_array_fields(store: Typestore, msgtype: str) -> tuple[str, ...] | None:
    """The float64 array fields of ``msgtype`` if it has the shape this module reads (header,
    ``string[] name``, then float64 arrays only), else ``None``."""
    fields = store.fielddefs.get(msgtype)
    if fields is None:
        return None
    defs = fields[1]
    if len(defs) < 3 or defs[0][1][1] != "std_msgs/msg/Header" or defs[1][0] != "name":
        return None
    sequence, base = 4, 1  # rosbags' Nodetype.SEQUENCE, Nodetype.BASE
    if defs[1][1] != (sequence, ((base, ("string", 0)), 0)):
        return None
    if any(kind != (sequence, ((base, ("float64", 0)), 0)) for _, kind in defs[2:]):
        return None
    header = store.fielddefs.get("std_msgs/msg/Header", ([], []))[1]
    if [name for name, _ in header] != ["stamp", "frame_id"]:
        return None
    return tuple(name for name, _ in defs[2:])


def _layout(raw: bytes, n_arrays: int) -> _Layout | None:
    """The layout of one little-endian CDR message (see the module docstring), or ``None`` if the
    bytes do not parse as one (wrong encapsulation, lengths past the end, more than alignment
    padding after the last field: what rosbags refuses too)."""
    if len(raw) < 16 or raw[:2] != _LITTLE_ENDIAN_CDR:
        return None
    body = memoryview(raw)[4:]
    end = len(body)
    fixed = np.zeros(len(raw), dtype=bool)
    fixed[:2] = True

    def count_at(pos: int) -> int:
        (value,) = struct.unpack_from("<I", body, pos)
        fixed[4 + pos:8 + pos] = True
        return value

    try:
        length = count_at(8)  # frame_id
        if length < 1 or 12 + length > end:
            return None
        fixed[16:16 + length] = True
        pos = (12 + length + 3) & -4
        names = []
        count = count_at(pos)
        pos += 4
        for _ in range(count):
            pos = (pos + 3) & -4
            length = count_at(pos)
            if length < 1 or pos + 4 + length > end or body[pos + 4 + length - 1] != 0:
                return None
            fixed[8 + pos:8 + pos + length] = True
            names.append(bytes(body[pos + 4:pos + 3 + length]).decode())
            pos += 4 + length
        arrays = []
        for _ in range(n_arrays):
            pos = (pos + 3) & -4
            count = count_at(pos)
            pos += 4
            if count:
                pos = (pos + 7) & -8
            if pos + 8 * count > end:
                return None
            arrays.append((4 + pos, count))
            pos += 8 * count
    except (struct.error, UnicodeDecodeError):
        return None
    if not 0 <= end - pos <= 3:
        return None
    return _Layout(len(raw), tuple(names), tuple(arrays), fixed)


def _stamp_ns(msg) -> int:
    stamp = msg.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _deserialised(raws: Sequence[bytes], index: np.ndarray, store: Typestore, msgtype: str,
                  fields: Sequence[str]) -> list[MessageGroup]:
    """Messages ``index`` deserialised by rosbags, one group per message."""
    out = []
    for k in index:
        msg = store.deserialize_cdr(raws[k], msgtype)
        arrays = tuple(np.asarray(getattr(msg, f), dtype=float).reshape(1, -1) for f in fields)
        out.append(MessageGroup(np.array([k]), tuple(msg.name), np.array([_stamp_ns(msg)], np.int64),
                                arrays))
    return out


def _matches(group: MessageGroup, reference: MessageGroup) -> bool:
    """Same names, stamp and array bits (NaN included) as rosbags' deserialisation."""
    return (group.names == reference.names and group.stamps[0] == reference.stamps[0]
            and all(a.shape[1] == b.shape[1] and a[0].tobytes() == b[0].tobytes()
                    for a, b in zip(group.arrays, reference.arrays, strict=True)))


def read_joint_arrays(raws: Sequence[bytes], store: Typestore, msgtype: str) -> list[MessageGroup]:
    """The stamps, names and float64 arrays of serialised ``msgtype`` messages ``raws``, in groups
    of messages with the same names and array lengths, ordered by their first message. Values are
    exactly those of ``store.deserialize_cdr`` (which reads whatever this reader does not).
    ``ValueError`` if ``msgtype`` is not of that shape (see :func:`joint_array_fields`).
    """
    fields = joint_array_fields(store, msgtype)
    if fields is None:
        raise ValueError(f"{msgtype} is not a header, string[] name and float64 arrays")
    todo = np.arange(len(raws))
    groups: list[MessageGroup] = []
    sizes = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    layouts = 0
    while todo.size:
        first = int(todo[0])
        layouts += 1
        if layouts > MAX_LAYOUTS:  # a topic of ever-changing layouts: rosbags reads the rest
            groups += _deserialised(raws, todo, store, msgtype, fields)
            break
        layout = _layout(bytes(raws[first]), len(fields))
        if layout is None:
            groups += _deserialised(raws, todo[:1], store, msgtype, fields)
            todo = todo[1:]
            continue
        same = todo[sizes[todo] == layout.size]
        block = np.frombuffer(b"".join(raws[k] for k in same), dtype=np.uint8).reshape(same.size,
                                                                                      layout.size)
        fixed = layout.fixed
        alike = (block[:, fixed] == block[0, fixed]).all(axis=1)
        rows, members = block[alike], same[alike]
        sec = rows[:, 4:8].copy().view("<i4")[:, 0].astype(np.int64)
        nanosec = rows[:, 8:12].copy().view("<u4")[:, 0].astype(np.int64)
        arrays = tuple(rows[:, off:off + 8 * count].copy().view("<f8").astype(float, copy=False)
                       for off, count in layout.arrays)
        group = MessageGroup(members, layout.names, sec * 1_000_000_000 + nanosec, arrays)
        reference = _deserialised(raws, members[:1], store, msgtype, fields)[0]
        if _matches(MessageGroup(members[:1], group.names, group.stamps[:1],
                                 tuple(a[:1] for a in arrays)), reference):
            groups.append(group)
        else:
            log.debug("%s: the CDR layout reader disagrees with rosbags on message %d; reading "
                      "its %d messages with rosbags", msgtype, first, members.size)
            groups += _deserialised(raws, members, store, msgtype, fields)
        todo = np.setdiff1d(todo, members, assume_unique=True)
    groups.sort(key=lambda g: int(g.index[0]))
    return groups
