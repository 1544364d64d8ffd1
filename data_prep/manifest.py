"""manifest.json: what convert.py wrote into an output directory, and the check of a directory against it.

    {"schema_version": 1, "tool": "data_prep/convert.py", "format": "tfrecord", "reader": "...",
     "label_offset": 1, "images": 8, "source": {"images": 8, "bytes": 123456},
     "classes": [{"wnid": "n01440764", "index": 0, "label": 1, "images": 4}, ...],
     "files": [{"path": "train-00000-of-00002", "bytes": 1234, "sha256": "...", "records": 4}, ...]}

`index` is the class's place in sorted wnid order (or its label in a given list), `label` what the format
stores (index + label_offset). Paths are relative to the output directory, `/`-separated, sorted; the
manifest itself is not listed. It holds no time stamp or absolute path, so the same input gives the same
bytes (compare its sha256 across hosts). Standard library only: verify.py runs it on the data hosts.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

NAME = "manifest.json"
SCHEMA_VERSION = 1
TOOL = "data_prep/convert.py"
SHOW = 10


class ManifestError(Exception):
    """No usable manifest: one line naming the file."""


def dumps(manifest: dict) -> bytes:
    """JSON with sorted keys; each class and file entry on one line (a manifest of 1.28M files stays readable)."""
    head = {k: v for k, v in manifest.items() if k not in ("classes", "files")}
    lines = ["{"]
    for key in sorted(head):
        lines.append(f"  {json.dumps(key)}: {json.dumps(head[key], sort_keys=True)},")
    for key in ("classes", "files"):
        items = manifest.get(key, [])
        lines.append(f"  {json.dumps(key)}: [")
        body = [f"    {json.dumps(item, sort_keys=True, separators=(', ', ': '))}" for item in items]
        lines.append(",\n".join(body)) if body else None
        lines.append("  ]," if key == "classes" else "  ]")
    lines.append("}")
    return ("\n".join(line for line in lines if line is not None) + "\n").encode("utf-8")


def load(out_dir: Path) -> tuple[dict, str]:
    """(manifest, its sha256) of OUT_DIR/manifest.json; ManifestError naming the file otherwise."""
    path = out_dir / NAME
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("tool") != TOOL or not isinstance(manifest.get("files"), list):
        raise ManifestError(f"{path}: not a manifest written by {TOOL}")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise ManifestError(f"{path}: schema_version {manifest.get('schema_version')!r}, this tool reads "
                            f"{SCHEMA_VERSION}")
    return manifest, hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def listed_files(out_dir: Path) -> set[str]:
    """Every regular file under OUT_DIR (relative, /-separated), the manifest and hidden names excluded."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(out_dir):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = os.path.relpath(dirpath, out_dir)
        for name in filenames:
            if name.startswith("."):
                continue
            path = name if rel == "." else f"{rel.replace(os.sep, '/')}/{name}"
            if path != NAME:
                found.add(path)
    return found


def check_files(out_dir: Path, manifest: dict, hashes: bool = True, progress=None) -> dict:
    """Every listed file is there with its size (and sha256 unless hashes=False); files not listed.

    Returns {"files", "missing", "missing_first", "mismatched", "mismatched_first", "extra": [...]}."""
    missing, mismatched = [], []
    for i, entry in enumerate(manifest["files"]):
        path = out_dir / entry["path"]
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            missing.append(entry["path"])
            continue
        if size != entry["bytes"]:
            mismatched.append(f"{entry['path']}: {size} bytes, the manifest says {entry['bytes']}")
        elif hashes and sha256_file(path) != entry["sha256"]:
            mismatched.append(f"{entry['path']}: sha256 differs from the manifest's")
        if progress and i % 10000 == 9999:
            progress(i + 1)
    extra = sorted(listed_files(out_dir) - {e["path"] for e in manifest["files"]})
    return {"files": len(manifest["files"]), "missing": len(missing), "missing_first": missing[:SHOW],
            "mismatched": len(mismatched), "mismatched_first": mismatched[:SHOW], "extra": extra}
