"""Reading a bundle archive safely: plain files and folders only, nothing outside its one top folder, within the
size and ratio limits counted while decompressing; input that is no bundle at all told apart (the auditor's bad
input, not a bundle that fails)."""

from __future__ import annotations

import gzip
import tarfile
import tempfile
import zlib
from pathlib import Path

from kit.core.inputs import KitError

MANIFEST = "manifest.json"  # its SCHEMA_VERSIONS entry is provenance.json's version too
MAX_MEMBER_BYTES = 8 * 2**30
MAX_UNPACKED_BYTES = 4 * 2**30  # kit verify --max-unpacked-bytes
MAX_RATIO = 250  # unpacked / archive bytes, kit verify --max-ratio
RATIO_FLOOR = 2**20  # the ratio counts past 1 MiB only: tar pads even a tiny archive to 10 KiB


class BundleError(KitError):
    """A bundle that cannot be made or read (one line, naming the file)."""


class NotABundle(BundleError):
    """Input that is no bundle at all (not gzip, or no manifest, provenance or run folder at its top): the
    auditor's mistake, exit 2, not a bundle that fails."""


GZIP_MAGIC = b"\x1f\x8b"
BUNDLE_TOP = (MANIFEST, "provenance.json", "run")  # a bundle's top folder holds at least one of these


def not_a_bundle(path: Path, why: str) -> NotABundle:
    return NotABundle(f"{path}: not a bundle ({why}): give the .tar.gz `kit bundle` wrote, or its unpacked folder")


def refuse_non_bundle_folder(root: Path) -> None:
    """NotABundle when `root` holds none of a bundle's top entries."""
    if not any((root / name).exists() for name in BUNDLE_TOP):
        raise not_a_bundle(root, f"no {', '.join(BUNDLE_TOP)} at its top")


def _within_limits(bundle: Path, unpacked: int, packed: int, max_bytes: int, max_ratio: float) -> None:
    if unpacked > max_bytes:
        raise BundleError(f"{bundle}: unpacks to more than {max_bytes} bytes; refused before extracting "
                          "(kit verify --max-unpacked-bytes N raises the limit)")
    if unpacked > max(max_ratio * packed, RATIO_FLOOR):
        raise BundleError(f"{bundle}: unpacks to more than {max_ratio:g} times its {packed} bytes (a decompression "
                          "bomb?); refused before extracting (kit verify --max-ratio N raises the limit)")


def unpack(bundle: Path, into: Path, max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
           max_ratio: float = MAX_RATIO) -> Path:
    """Extract a bundle safely (plain files and folders only, no links, nothing outside, within the size and
    ratio limits, counted while decompressing) -> its top folder."""
    limits = (Path(bundle).stat().st_size, max_unpacked_bytes, max_ratio)
    with open(bundle, "rb") as f:
        if f.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
            raise not_a_bundle(bundle, "not a gzip file")
    try:
        # decompressed once, into a temporary file the tar is then read from: reading the .tar.gz itself again
        # would decompress it twice more (its members, then each member's data after a seek back)
        with tempfile.TemporaryFile(prefix="kit-unpack-") as plain:
            _decompress(bundle, plain, limits)
            with tarfile.open(fileobj=plain, mode="r:") as tar:
                return _extract(bundle, tar, into, limits)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise BundleError(f"{bundle}: corrupt or truncated archive ({type(exc).__name__}: {exc})") from None


def _decompress(bundle: Path, plain, limits: tuple) -> None:
    """The whole gzip stream into `plain` (to the end: the gzip CRC and length checks run only there), stopping
    past the size or ratio limits."""
    unpacked = 0
    with gzip.open(bundle, "rb") as stream:
        while block := stream.read(1 << 20):
            unpacked += len(block)
            _within_limits(bundle, unpacked, *limits)
            plain.write(block)
    plain.seek(0)


def _extract(bundle: Path, tar: tarfile.TarFile, into: Path, limits: tuple) -> Path:
    """Every member checked (plain files and folders only, nothing outside, sizes), then all extracted."""
    members = tar.getmembers()
    tops, declared = set(), 0
    for m in members:
        name = Path(m.name)
        if name.is_absolute() or ".." in name.parts or not (m.isfile() or m.isdir()):
            raise BundleError(f"{bundle}: refused member {m.name!r} (absolute, '..', link or device)")
        if m.size > MAX_MEMBER_BYTES:
            raise BundleError(f"{bundle}: member {m.name} is larger than {MAX_MEMBER_BYTES} bytes")
        declared += m.size
        _within_limits(bundle, declared, *limits)
        tops.add(name.parts[0])
    if not any(len(Path(m.name).parts) >= 2 and Path(m.name).parts[1] in BUNDLE_TOP for m in members):
        raise not_a_bundle(bundle, f"no top folder holds {', '.join(BUNDLE_TOP)}")
    if len(tops) != 1:
        raise BundleError(f"{bundle}: expected one top folder, found {sorted(tops)[:5]}")
    tar.extractall(into, members=members, filter="data")
    return Path(into) / tops.pop()
