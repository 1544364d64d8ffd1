"""Is an image file whole, and what is it? A structural check of JPEG and PNG bytes, without decoding pixels.

    info = inspect(path, data)   # ImageInfo(format, width, height, channels, colorspace) or CorruptImage

JPEG: starts with SOI (FF D8); the marker segments up to the first scan (SOS) are well formed and include a
frame header (SOFn) with non-zero width, height and 1, 3 or 4 components; an EOI marker (FF D9) follows the
scan. A file cut short (the usual corruption: an interrupted copy or download) has no EOI and is refused.
PNG: the signature, an IHDR chunk first, and the IEND chunk at the end.

It reads headers only: a file whose entropy-coded data is damaged but whose structure is whole passes
(decoding every pixel would cost more than the conversion itself). Standard library only; no import of the kit.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
# SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC): the frame headers
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])  # TEM, RST0..7: no length field
_COLORSPACE = {1: "Grayscale", 3: "RGB", 4: "CMYK"}
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}  # colour type -> channels (palette: RGB)


class CorruptImage(Exception):
    """The bytes are not a whole JPEG/PNG; str() names the file and what is wrong."""


@dataclass(frozen=True)
class ImageInfo:
    format: str  # "JPEG" or "PNG"
    width: int
    height: int
    channels: int
    colorspace: str  # Grayscale, RGB, CMYK (JPEG); Grayscale, GrayscaleAlpha, RGB, RGBA (PNG)


def _jpeg(path: Path | str, data: bytes) -> ImageInfo:
    n = len(data)
    pos = 2
    frame = None
    while True:
        if pos >= n:
            raise CorruptImage(f"{path}: corrupt JPEG: truncated: ends inside its headers (offset {n}, no scan)")
        if data[pos] != 0xFF:
            raise CorruptImage(f"{path}: corrupt JPEG: expected a marker at offset {pos}, found 0x{data[pos]:02x}")
        while pos < n and data[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= n:
            raise CorruptImage(f"{path}: corrupt JPEG: truncated: ends inside its headers (offset {n})")
        marker = data[pos]
        pos += 1
        if marker in _STANDALONE:
            continue
        if marker in (0xD8, 0xD9, 0x00):
            raise CorruptImage(f"{path}: corrupt JPEG: unexpected marker 0xff{marker:02x} at offset {pos - 2}")
        if pos + 2 > n:
            raise CorruptImage(f"{path}: corrupt JPEG: truncated: ends inside a segment header (offset {n})")
        (length,) = struct.unpack_from(">H", data, pos)
        if length < 2 or pos + length > n:
            raise CorruptImage(f"{path}: corrupt JPEG: truncated: segment 0xff{marker:02x} at offset {pos - 2} "
                               f"runs past the end of the file ({n} bytes)")
        if marker in _SOF:
            if length < 8:
                raise CorruptImage(f"{path}: corrupt JPEG: frame header too short at offset {pos - 2}")
            _precision, height, width, components = struct.unpack_from(">BHHB", data, pos + 2)
            frame = (width, height, components)
        if marker == 0xDA:  # start of scan: entropy-coded data follows
            if frame is None:
                raise CorruptImage(f"{path}: corrupt JPEG: scan before any frame header (no SOFn)")
            scan = pos + length
            break
        pos += length
    width, height, components = frame
    if width == 0 or height == 0 or components not in _COLORSPACE:
        raise CorruptImage(f"{path}: corrupt JPEG: frame header says {width}x{height} with {components} "
                           "component(s)")
    # In entropy-coded data 0xFF is always followed by 0x00 or RSTn, so FF D9 after the scan is the EOI.
    if data.rfind(b"\xff\xd9", scan) < 0:
        raise CorruptImage(f"{path}: corrupt JPEG: truncated (no end-of-image marker after the scan; "
                           f"{n} bytes)")
    return ImageInfo("JPEG", width, height, components, _COLORSPACE[components])


def _png(path: Path | str, data: bytes) -> ImageInfo:
    if len(data) < 8 + 25 + 12 or data[12:16] != b"IHDR":
        raise CorruptImage(f"{path}: corrupt PNG: no IHDR chunk after the signature")
    width, height, _depth, colour = struct.unpack_from(">IIBB", data, 16)
    if not data.endswith(PNG_IEND):
        raise CorruptImage(f"{path}: corrupt PNG: truncated (no IEND chunk at the end; {len(data)} bytes)")
    if width == 0 or height == 0 or colour not in _PNG_CHANNELS:
        raise CorruptImage(f"{path}: corrupt PNG: IHDR says {width}x{height}, colour type {colour}")
    channels = _PNG_CHANNELS[colour]
    colorspace = {1: "Grayscale", 2: "GrayscaleAlpha", 3: "RGB", 4: "RGBA"}[channels]
    return ImageInfo("PNG", width, height, channels, colorspace)


def inspect(path: Path | str, data: bytes) -> ImageInfo:
    """Check DATA (the contents of PATH) is a whole JPEG or PNG; return what it is, or raise CorruptImage."""
    if data[:2] == b"\xff\xd8":
        return _jpeg(path, data)
    if data[:8] == PNG_SIGNATURE:
        return _png(path, data)
    if not data:
        raise CorruptImage(f"{path}: empty file, not an image")
    raise CorruptImage(f"{path}: not a JPEG or PNG (starts with {data[:8].hex(' ')})")
