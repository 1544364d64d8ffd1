"""A published program's saved program (what its code downloads at run time), staged beforehand and checked.

FleetX's VGG16() (fleetx/applications/model.py at the pin) loads `<purelib>/fleetx/applications/vgg16_nchw/` and,
where that is absent, wgets it from fleet.bj.bcebos.com into the Python's site-packages while training starts. The
kit stages it instead, from an archive whose sha256 is known, into a folder shaped like site-packages:

    stage(archive, root, into, name, reads, sha256, sha256_from)  -> root/into/name/ and root/into/name.json
    check(root, into, name)                                        -> that record, every file re-hashed

Standard library only: the kit's FleetX driver calls check() on the host before FleetX looks for the program.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from pathlib import Path, PurePosixPath

CHUNK = 1 << 20


class SavedProgramError(Exception):
    """A saved program that is absent, not the archive it was staged from, or an archive that is not it."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def record_path(root: Path, into: str, name: str) -> Path:
    return Path(root) / into / f"{name}.json"


def stage(archive: Path, root: Path, into: str, name: str, reads: tuple[str, ...], sha256: str,
          sha256_from: str) -> dict:
    """Unpack `archive` (sha256 `sha256`, as `sha256_from` states it) to root/into/name/ when it holds exactly one
    top folder `name` with the files `reads`; record each file's sha256 beside it. A staged one is re-checked, never
    overwritten."""
    archive, folder = Path(archive), Path(root) / into / name
    if record_path(root, into, name).is_file() or folder.exists():
        return check(root, into, name)
    found = sha256_of(archive)
    if found != sha256:
        raise SavedProgramError(f"{archive}: sha256 {found}, not the {sha256} of {sha256_from}")
    part = folder.with_name(f".{name}.part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            tops = {PurePosixPath(m.name).parts[0] for m in tar.getmembers() if PurePosixPath(m.name).parts}
            if tops != {name}:
                raise SavedProgramError(f"{archive}: expected one top folder {name}/, found "
                                        f"{', '.join(sorted(tops)[:5]) or 'nothing'}")
            tar.extractall(part, filter="data")
        files = sorted(p for p in (part / name).rglob("*") if p.is_file())
        names = {p.relative_to(part / name).as_posix() for p in files}
        if missing := [r for r in reads if r not in names]:
            raise SavedProgramError(f"{archive}: {name}/ lacks {', '.join(missing)} (the program reads them)")
        record = {"name": name, "archive": archive.name, "archive_sha256": found, "sha256_from": sha256_from,
                  "files": {p.relative_to(part / name).as_posix(): sha256_of(p) for p in files}}
        (part / name).rename(folder)
    except (OSError, tarfile.TarError) as exc:
        raise SavedProgramError(f"{archive}: {exc}") from None
    finally:
        shutil.rmtree(part, ignore_errors=True)
    record_path(root, into, name).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def check(root: Path, into: str, name: str) -> dict:
    """The record of root/into/name, when every file it lists is there unchanged and no other file is."""
    where, folder = record_path(root, into, name), Path(root) / into / name
    try:
        record = json.loads(where.read_text())
    except FileNotFoundError:
        raise SavedProgramError(f"{name}: not staged ({where} is missing)") from None
    except (OSError, ValueError) as exc:
        raise SavedProgramError(f"{where}: unreadable ({exc})") from None
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict) or not files:
        raise SavedProgramError(f"{where}: no files recorded")
    here = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()
    wrong = [f"{f} missing" for f in sorted(set(files) - here)]
    wrong += [f"{f} not staged" for f in sorted(here - set(files))]
    wrong += [f"{f} changed" for f in sorted(set(files) & here) if sha256_of(folder / f) != files[f]]
    if wrong:
        raise SavedProgramError(f"{folder}: not the program staged from {record.get('archive')} "
                                f"(sha256 {record.get('archive_sha256')}): {'; '.join(wrong)}")
    return record
