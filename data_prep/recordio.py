"""MXNet RecordIO (`train.rec` + `train.idx`) as MXNet's tools/im2rec.py --pass-through writes it.

Framing (dmlc-core src/recordio.cc, RecordIOWriter::WriteRecord), little-endian uint32 words:
    magic 0xced7230a | lrec = cflag << 29 | length | data | zero padding to a multiple of 4 bytes
A record whose data holds the magic word at a 4-byte-aligned offset is split there (the magic itself is
dropped; the reader puts it back): parts carry cflag 1 (first), 2 (middle), 3 (last); a whole record has
cflag 0. Records are < 2**29 bytes.

Each record's data is mx.recordio.pack(IRHeader(flag, label, id, id2), image): struct `IfQQ`
(uint32 flag = 0 for one label, float32 label, uint64 id, uint64 id2 = 0; 24 bytes, no padding) followed by
the image file's bytes unchanged (--pass-through). Labels are the class index 0..999 (LABEL_OFFSET 0, as
im2rec --list --recursive numbers the sorted class folders, and as DLE MXNet trains them).
`train.idx` has one line `<id>\\t<byte offset of the record>` per record, in file order (MXIndexedRecordIO).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
LABEL_OFFSET = 0
MAX_RECORD = 1 << 29
IR_HEADER = struct.Struct("<IfQQ")  # flag, label, id, id2: mx.recordio's _IR_FORMAT 'IfQQ' on little-endian
_WORD = struct.Struct("<I")


class TruncatedRecord(Exception):
    """A RecordIO file ends inside a record or loses its framing; str() names the file and offset."""


def pack(label: int, image_id: int, image: bytes) -> bytes:
    """mx.recordio.pack(IRHeader(0, label, id, 0), image)."""
    return IR_HEADER.pack(0, float(label), image_id, 0) + image


def unpack(record: bytes) -> tuple[int, float, int, int, bytes]:
    """(flag, label, id, id2, image) of one record's data (flag 0: one float label)."""
    if len(record) < IR_HEADER.size:
        raise ValueError(f"record of {len(record)} bytes is shorter than the {IR_HEADER.size}-byte IRHeader")
    flag, label, image_id, id2 = IR_HEADER.unpack_from(record)
    return flag, label, image_id, id2, record[IR_HEADER.size + 4 * flag:]


def _lrec(cflag: int, length: int) -> bytes:
    return MAGIC_BYTES + _WORD.pack(cflag << 29 | length)


def frame(data: bytes) -> bytes:
    """DATA in RecordIO framing, split at aligned magic words exactly as dmlc's writer does."""
    size = len(data)
    if size >= MAX_RECORD:
        raise ValueError(f"RecordIO records must be < 2**29 bytes, got {size}")
    parts = []
    start = 0  # dmlc's dptr
    at = data.find(MAGIC_BYTES)
    while at >= 0:
        if at % 4 == 0 and at + 4 <= (size >> 2) << 2:
            parts.append(_lrec(1 if start == 0 else 2, at - start) + data[start:at])
            start = at + 4
            at = data.find(MAGIC_BYTES, start)
        else:
            at = data.find(MAGIC_BYTES, at + 1)
    parts.append(_lrec(3 if start else 0, size - start) + data[start:])
    pad = -size % 4
    return b"".join(parts) + b"\x00" * pad


def read_records(fh: BinaryIO, name: str) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of each record of an open .rec file, split parts joined; TruncatedRecord naming NAME."""
    offset = 0
    while True:
        start = offset
        pieces: list[bytes] = []
        while True:
            head = fh.read(8)
            if not head and not pieces:
                return
            if len(head) < 8:
                raise TruncatedRecord(f"{name}: truncated: ends inside a record header at offset {offset}")
            magic, lrec = struct.unpack("<II", head)
            if magic != MAGIC:
                raise TruncatedRecord(f"{name}: corrupt: no RecordIO magic at offset {offset} (0x{magic:08x})")
            cflag, length = lrec >> 29, lrec & (MAX_RECORD - 1)
            expected = (0, 1) if not pieces else (2, 3)
            if cflag not in expected:
                raise TruncatedRecord(f"{name}: corrupt: record part flag {cflag} at offset {offset}")
            padded = length + (-length % 4) if cflag in (0, 3) else length
            body = fh.read(padded)
            if len(body) < padded:
                raise TruncatedRecord(f"{name}: truncated: record at offset {offset} needs {padded + 8} bytes, "
                                      f"{len(body) + 8} left")
            pieces.append(body[:length])
            offset += 8 + padded
            if cflag in (0, 3):
                break
        yield start, MAGIC_BYTES.join(pieces)


def idx_line(image_id: int, offset: int) -> str:
    return f"{image_id}\t{offset}\n"


def lst_line(image_id: int, label: int, rel_path: str) -> str:
    """One line of im2rec's .lst: `id<TAB>label as %f<TAB>path relative to the image root`."""
    return f"{image_id}\t{float(label):f}\t{rel_path}\n"
