"""Recovery of a partial recording: a sequential scan of an MCAP file cut short (a recorder killed
with ``kill -9``) and :func:`recover_bag`, which rewrites its complete messages as a readable bag
(``sysid bag recover PATH``)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import StoragePlugin, Writer

from sysid_ros.core.data import mcap_crc
from sysid_ros.core.data.bag import (
    PARTIAL_STATE,
    header_stamp_ns,
    partial_folders,
    typestore,
)
from sysid_ros.core.data.stream_time import GapTracker
from sysid_ros.core.errors import DataError

log = logging.getLogger(__name__)

# -- recovery of a partial MCAP file (the MCAP record framing: https://mcap.dev/spec) -----------

_MAGIC = b"\x89MCAP0\r\n"
_SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _DATA_END = 0x03, 0x04, 0x05, 0x06, 0x0F


@dataclass
class McapScan:
    """What a sequential read of an MCAP file found: schemas (id → (name, encoding, data)),
    channels (id → (schema id, topic, encoding)), complete messages ``(channel, log_time, data)``
    in file order, and where it stopped (``truncated``: bytes of an incomplete record)."""

    schemas: dict[int, tuple[str, str, bytes]]
    channels: dict[int, tuple[int, str, str]]
    messages: list[tuple[int, int, bytes]]
    truncated: int = 0
    complete: bool = False  # the data section's end record was reached


def _string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", buf, pos)
    return bytes(buf[pos + 4:pos + 4 + n]).decode(), pos + 4 + n


def _decompress(data: bytes, compression: str, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        return zstd.decompress(data)
    if compression == "lz4":
        from lz4.frame import decompress

        return decompress(data)
    raise DataError(f"unsupported MCAP chunk compression {compression!r}")


def _scan_records(buf: memoryview, scan: McapScan, nested: bool) -> int:
    """Records of ``buf`` into ``scan`` up to the first incomplete one; returns where it stopped."""
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < 9:
            return pos
        op, length = struct.unpack_from("<BQ", buf, pos)
        body = pos + 9
        rec = buf[body:body + length]
        if body + length > end:
            if op == _CHUNK and not nested and end - body >= 28:
                # an uncompressed chunk cut short still holds complete messages
                try:
                    compression, p = _string(rec, 28)
                    if compression == "":
                        _scan_records(rec[p + 8:], scan, nested=True)
                except (struct.error, UnicodeDecodeError):
                    pass
            return pos
        if op == _SCHEMA:
            (sid,) = struct.unpack_from("<H", rec, 0)
            name, p = _string(rec, 2)
            encoding, p = _string(rec, p)
            (n,) = struct.unpack_from("<I", rec, p)
            scan.schemas[sid] = (name, encoding, bytes(rec[p + 4:p + 4 + n]))
        elif op == _CHANNEL:
            cid, sid = struct.unpack_from("<HH", rec, 0)
            topic, p = _string(rec, 4)
            encoding, p = _string(rec, p)
            scan.channels[cid] = (sid, topic, encoding)
        elif op == _MESSAGE:
            cid, _seq, log_time, _pub = struct.unpack_from("<HIQQ", rec, 0)
            scan.messages.append((cid, log_time, bytes(rec[22:])))
        elif op == _CHUNK and not nested:
            _, _, size, _crc = struct.unpack_from("<QQQI", rec, 0)
            compression, p = _string(rec, 28)
            (n,) = struct.unpack_from("<Q", rec, p)
            data = _decompress(bytes(rec[p + 8:p + 8 + n]), compression, size)
            _scan_records(memoryview(data), scan, nested=True)
        elif op == _DATA_END and not nested:
            scan.complete = True
            return body + length
        pos = body + length
    return pos


def scan_mcap(file: str | Path) -> McapScan:
    """Read an MCAP file's records in order up to its end or truncation (no summary needed)."""
    data = Path(file).read_bytes()
    if not data.startswith(_MAGIC):
        raise DataError(f"{file}: not an MCAP file (no MCAP magic)")
    scan = McapScan({}, {}, [])
    stop = len(_MAGIC) + _scan_records(memoryview(data)[len(_MAGIC):], scan, nested=False)
    scan.truncated = 0 if scan.complete else len(data) - stop
    return scan


@dataclass(frozen=True)
class Recovery:
    """A recovered bag: its path, messages per topic, header-stamp gaps per stamped topic, the
    bytes of an incomplete last record that were dropped, and the folder it came from."""

    path: Path
    counts: dict[str, int]
    gaps: dict[str, int]
    truncated_bytes: int
    source: Path


def _first_field_is_header(msgtype: str) -> bool:
    fields = typestore().fielddefs.get(msgtype)
    if not fields or not fields[1]:
        return False
    kind = fields[1][0][1]
    return kind[0] == 2 and kind[1] == "std_msgs/msg/Header"  # (NODETYPE NAME, type)


def recover_bag(path: str | Path) -> Recovery:
    """Rebuild a complete bag at its final name from an interrupted recording's partial MCAP.

    ``path`` is the intended bag path or its ``.<name>.partial-*`` folder. Every complete message
    is kept (in file order, no duplicates); the metadata gets the recovery counts
    (``sysid_ros.recovered.<topic>``), the gaps in header stamps (``sysid_ros.gaps.<topic>``) and
    the recorder's DDS loss counts when it left them (``sysid_ros.lost.<topic>``). The partial
    folder is removed only after the new bag is complete."""
    path = Path(path).absolute()
    if path.name.startswith(".") and ".partial-" in path.name:
        folder = path
        final = path.parent / path.name[1:path.name.index(".partial-")]
    else:
        final = path
        folders = partial_folders(path)
        if not folders:
            raise DataError(f"{path}: no interrupted recording (.{path.name}.partial-*) to recover")
        if len(folders) > 1:
            raise DataError(f"{path}: several interrupted recordings, name one: "
                            f"{[str(f) for f in folders]}")
        folder = folders[0]
    if final.exists():
        raise DataError(f"{final} exists; move it away before recovering {folder}")
    files = sorted((folder / final.name).glob("*.mcap")) if (folder / final.name).is_dir() else []
    if not files:
        raise DataError(f"{folder}: no MCAP file to recover (only MCAP recordings can be recovered)")
    scan = scan_mcap(files[0])
    state_file = folder / PARTIAL_STATE
    state = json.loads(state_file.read_text(encoding="utf-8")) if state_file.is_file() else {}
    store = typestore()
    counts: dict[str, int] = {}
    gaps: dict[str, int] = {}
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.recover-", dir=final.parent))
    try:
        with Writer(staging / final.name, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
            conns: dict[int, Any] = {}
            counters: dict[int, GapTracker] = {}
            for cid, (sid, topic, _enc) in sorted(scan.channels.items()):
                msgtype = scan.schemas.get(sid, ("",))[0]
                if msgtype not in store.fielddefs:
                    log.warning("%s: not recovering %s: type %r unknown to the type store",
                                folder, topic, msgtype)
                    continue
                conns[cid] = writer.add_connection(topic, msgtype, typestore=store)
                counts[topic] = 0
                if _first_field_is_header(msgtype):
                    counters[cid] = GapTracker()
            for cid, ns, data in scan.messages:
                conn = conns.get(cid)
                if conn is None:
                    continue
                writer.write(conn, ns, data)
                counts[conn.topic] += 1
                if cid in counters:
                    stamp = header_stamp_ns(data)
                    if stamp is not None:
                        counters[cid].add(stamp)
            for cid, counter in counters.items():
                gaps[conns[cid].topic] = counter.missing
            for key, value in (state.get("custom_data") or {}).items():  # e.g. the effort lag
                writer.set_custom_data(str(key), str(value))
            for topic, n in counts.items():
                writer.set_custom_data(f"sysid_ros.recovered.{topic}", str(n))
                if topic in gaps:
                    writer.set_custom_data(f"sysid_ros.gaps.{topic}", str(gaps[topic]))
            for topic, n in (state.get("lost") or {}).items():
                writer.set_custom_data(f"sysid_ros.lost.{topic}", str(int(n)))
            writer.set_custom_data("sysid_ros.recovered_from", str(folder))
            writer.set_custom_data("sysid_ros.truncated_bytes", str(scan.truncated))
        mcap_crc.seal_bag(staging / final.name)
        # the rebuilt bag folder renamed whole (the recorder's protocol, see core/data/bag.py)
        os.replace(staging / final.name, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)  # only now: the new bag is complete
    return Recovery(final, counts, gaps, scan.truncated, folder)
