"""Integrity of MCAP files: CRCs written after a bag is closed, checked before it is read.

The MCAP format (https://mcap.dev/spec) carries three CRC32 fields that may be 0 ("not
computed"): each Chunk's ``uncompressed_crc`` (of its records), the Data End record's
``data_section_crc`` (of every byte before it) and the Footer's ``summary_crc`` (of the summary
section through the footer's ``summary_offset_start``). The ``rosbags`` writer leaves them 0;
:func:`seal` fills them in, and :func:`verify` checks every non-zero one and the record framing,
so a file with flipped or missing bytes is refused in one line naming the file and the byte
offset where it stops making sense, instead of a decoder failing deep inside (or, worse, a
flipped float read as data).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from sysid_ros.core.errors import DataError

MAGIC = b"\x89MCAP0\r\n"
_FOOTER, _CHUNK, _DATA_END = 0x02, 0x06, 0x0F
_FOOTER_LENGTH = 20  # summary_start u64, summary_offset_start u64, summary_crc u32


class _CorruptError(Exception):
    def __init__(self, offset: int, why: str) -> None:
        super().__init__(why)
        self.offset, self.why = offset, why


def _chunk_records(buf: bytes | bytearray, body: int, length: int) -> tuple[int, bytes]:
    """(offset of the uncompressed_crc field, the chunk's uncompressed records)."""
    end = body + length
    if length < 28 + 4 + 8:
        raise _CorruptError(body, f"chunk record of {length} bytes, shorter than its fixed fields")
    (size,) = struct.unpack_from("<Q", buf, body + 16)
    (n,) = struct.unpack_from("<I", buf, body + 28)
    p = body + 32 + n
    if p + 8 > end:
        raise _CorruptError(body + 28, f"chunk compression name of {n} bytes overruns the chunk")
    compression = bytes(buf[body + 32:p])
    (records,) = struct.unpack_from("<Q", buf, p)
    if p + 8 + records > end:
        raise _CorruptError(p, f"chunk records of {records} bytes overrun the chunk")
    data = bytes(buf[p + 8:p + 8 + records])
    try:
        if compression == b"zstd":
            try:
                from compression import zstd
            except ImportError:
                from backports import zstd
            data = zstd.decompress(data)
        elif compression == b"lz4":
            from lz4.frame import decompress

            data = decompress(data)
        elif compression != b"":
            raise _CorruptError(body + 32, f"unknown chunk compression {compression[:20]!r}")
    except _CorruptError:
        raise
    except Exception as exc:  # each decompressor raises its own types on corrupt input
        raise _CorruptError(p + 8, f"chunk does not decompress ({type(exc).__name__})") from None
    if len(data) != size:
        raise _CorruptError(body + 16, f"chunk holds {len(data)} bytes, its header says {size}")
    return body + 24, data


def _walk(buf: bytes | bytearray):
    """Top-level records ``(offset, opcode, body offset, body length)`` up to and including the
    footer; raises :class:`_CorruptError` on broken framing."""
    if not buf.startswith(MAGIC):
        raise _CorruptError(0, "no MCAP magic at the start")
    if not buf.endswith(MAGIC) or len(buf) < 2 * len(MAGIC) + 9 + _FOOTER_LENGTH:
        raise _CorruptError(max(len(buf) - len(MAGIC), 0), "no MCAP magic at the end (truncated file?)")
    pos, end = len(MAGIC), len(buf) - len(MAGIC)
    while pos < end:
        if end - pos < 9:
            raise _CorruptError(pos, f"{end - pos} bytes left, too few for a record header")
        op, length = struct.unpack_from("<BQ", buf, pos)
        if pos + 9 + length > end:
            raise _CorruptError(pos, f"record 0x{op:02x} of {length} bytes overruns the file")
        yield pos, op, pos + 9, length
        if op == _FOOTER:
            if pos + 9 + length != end or length != _FOOTER_LENGTH:
                raise _CorruptError(pos, "the footer is not the last record")
            return
        pos += 9 + length
    raise _CorruptError(pos, "no footer record")


def seal(file: str | Path) -> None:
    """Write the CRCs of an MCAP file the ``rosbags`` writer closed (see the module)."""
    path = Path(file)
    buf = bytearray(path.read_bytes())
    data_end = None
    try:
        for pos, op, body, length in _walk(buf):
            if op == _CHUNK:
                at, records = _chunk_records(buf, body, length)
                struct.pack_into("<I", buf, at, zlib.crc32(records))
            elif op == _DATA_END and length >= 4:
                data_end = (pos, body)
            elif op == _FOOTER:
                if data_end is not None:
                    struct.pack_into("<I", buf, data_end[1], zlib.crc32(buf[:data_end[0]]))
                (start,) = struct.unpack_from("<Q", buf, body)
                if start:
                    struct.pack_into("<I", buf, body + 16, zlib.crc32(buf[start:body + 16]))
    except _CorruptError as exc:
        raise DataError(f"{path}: cannot seal a corrupt MCAP file at byte {exc.offset}: {exc.why}") from None
    path.write_bytes(buf)


def verify(file: str | Path) -> None:
    """Raise :class:`DataError` (one line: the file, the byte offset, what is wrong) when the
    framing of an MCAP file is broken or a non-zero CRC does not match."""
    path = Path(file)
    buf = path.read_bytes()
    data_end = None
    try:
        for pos, op, body, length in _walk(buf):
            if op == _CHUNK:
                at, records = _chunk_records(buf, body, length)
                (crc,) = struct.unpack_from("<I", buf, at)
                if crc and zlib.crc32(records) != crc:
                    raise _CorruptError(pos, "the chunk's CRC does not match its records")
            elif op == _DATA_END and length >= 4:
                data_end = pos
                (crc,) = struct.unpack_from("<I", buf, body)
                if crc and zlib.crc32(buf[:pos]) != crc:
                    raise _CorruptError(pos, f"the data section's CRC (bytes 0..{pos}) does not match")
            elif op == _FOOTER:
                start, offsets, crc = struct.unpack_from("<QQI", buf, body)
                if start and not (data_end is not None and data_end < start <= pos
                                  and (not offsets or start <= offsets <= pos)):
                    raise _CorruptError(body, f"the footer's summary start {start} is outside the file")
                if start and crc and zlib.crc32(buf[start:body + 16]) != crc:
                    raise _CorruptError(start, f"the summary's CRC (from byte {start}) does not match")
    except _CorruptError as exc:
        raise DataError(f"{path}: corrupt MCAP file at byte {exc.offset}: {exc.why}") from None
    except struct.error as exc:  # a field read past the end of a record that claimed to hold it
        raise DataError(f"{path}: corrupt MCAP file ({exc})") from None


def seal_bag(folder: str | Path) -> None:
    """:func:`seal` every MCAP file of a rosbag2 bag directory (an sqlite3 bag has none)."""
    for file in sorted(Path(folder).glob("*.mcap")):
        seal(file)


def verify_bag(folder: str | Path) -> None:
    """:func:`verify` every MCAP file of a rosbag2 bag directory."""
    for file in sorted(Path(folder).glob("*.mcap")):
        verify(file)
