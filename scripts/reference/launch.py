#!/usr/bin/env python3
"""Start one published benchmark program exactly as given, after recording it beside its log.

    python3 launch.py --record LOG_STEM.cmd.json --meta JSON --cwd MODEL_DIR [--checkout TOP] [--listing FILE] \
        [--pythonpath DIR ...] [--placeholder MODULE ...] [--scratch [--unlinked NAME ...]] \
        [--work-copy NAME --patch FILE --add FILE ...] \
        [--collect PATH ...] -- ARGV...

--meta is the kit's description of the run (kit.config.reference.record: argv, env, methods, ...); ARGV must
equal its "argv". The record adds what only this host knows: time, host name, the model code's git
commit and whether its tree is clean at it ("model_code_state", code_state.py beside this file: modified, deleted,
untracked, hidden files; TOP: the checkout's top folder, which git's safe.directory names; default MODEL_DIR;
with --listing, the pinned tree's files (trees/<code>.txt beside this file), a TOP that is no checkout of its own,
such as an unpacked archive, is judged by its files against them),
the patch's sha256, and the whole environment the program gets (values of secret-looking names redacted): each
--pythonpath DIR goes before the PYTHONPATH this process inherited on its host.
--placeholder MODULE: a module the program imports when it loads but never calls in the kit's modes (DLE: DALI).
When the program's Python cannot import it, its folder of placeholders/ beside this file (one a placeholder package:
nvidia.dali/, horovod/) goes first on its PYTHONPATH (names to import, an error naming the module if used) and the
record's "placeholders" says so, with why; a module the program's Python imports is never shadowed.
--work-copy NAME copies MODEL_DIR to ./NAME (a fresh copy each run; the checkout stays untouched),
applies --patch there (every context line must match at its stated line: no offset, no fuzz) and
copies each --add file into it (DLPerf ran PLSC's train.py from inside the checkout). Then this
process becomes ARGV in MODEL_DIR (or the copy): its output is the run's log.
--scratch runs ARGV in a new folder under $TMPDIR (kit-scratch-*, never inside this process's working
directory, the run's folder) holding a link to each entry of MODEL_DIR but the --unlinked names (what the
program saves there) and the --collect names at its top: relative paths reach the pinned code, and what the
program writes where it runs (checkpoints) stays out of the checkout. After the program, also when it
fails or a stop signal came, the folder is removed; the record's "scratch" says where it was and lists
each file removed with its bytes (the collected ones aside).
With --collect (files the program writes besides its output: DLLogger/raport JSON, a results folder;
relative to where it runs, or absolute) or --scratch, ARGV runs as a child instead (SIGTERM/SIGINT/SIGHUP
passed on), and what it wrote under --collect during the run is copied to outputs/ beside the record
(regular files only, links never followed), listed in the record's "outputs"; the exit status is the
program's.
Standard library only; never imports the kit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # code_state.py travels beside this file
from code_state import read_listing  # noqa: E402
from code_state import state as code_state  # noqa: E402

SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH", "COOKIE")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
EXIT_BAD_INPUT = 2


class PatchError(ValueError):
    pass


PLACEHOLDERS = Path(__file__).resolve().parent / "placeholders"
PROBE_S = 60


def placeholder_root(module: str) -> Path | None:
    """The folder of PLACEHOLDERS that provides MODULE: one a placeholder package, named by the longest prefix of
    the module's dotted name that has one (nvidia.dali/, horovod/), so that a module the host has is never
    shadowed by another's placeholder."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        root = PLACEHOLDERS / ".".join(parts[:n])
        if root.is_dir():
            return root
    return None


def placeholders(modules: list[str], program: str, cwd: Path) -> list[dict]:
    """Each MODULE the program's Python (PROGRAM when it is a python, else this one) cannot import is given by its
    placeholder folder (placeholder_root), put first on PYTHONPATH; what was found, for the record."""
    name = Path(program).name
    python = (shutil.which(program) or program) if name.startswith("python") else sys.executable
    out = []
    for module in modules:
        try:
            done = subprocess.run([python, "-c", f"import {module}"], cwd=cwd, capture_output=True, text=True,
                                  timeout=PROBE_S)
            said = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            why = None if done.returncode == 0 else said[-1]
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{python} -c 'import {module}': {exc}"
        root = placeholder_root(module) if why is not None else None
        if why is not None and root is None:
            why += f"; the kit has no placeholder for {module} ({PLACEHOLDERS})"
        path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root is not None and str(root) not in path:
            os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *path])
        out.append({"module": module, "placeholder": None if root is None else str(root), "why": why})
    return out


def redact(env: dict[str, str]) -> dict[str, str]:
    return {k: ("<redacted>" if any(m in k.upper() for m in SECRET_MARKERS) else v) for k, v in env.items()}


def parse_patch(text: str) -> dict[str, list[tuple[int, list[str], list[str]]]]:
    """Unified diff -> {path: [(old start line, old lines, new lines)]}; paths without their a/ b/ prefix."""
    files: dict[str, list[tuple[int, list[str], list[str]]]] = {}
    lines = text.splitlines()
    i, path = 0, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith("b/") else path
            files.setdefault(path, [])
        elif (m := HUNK.match(line)) and path is not None:
            old_count = int(m[2]) if m[2] is not None else 1
            new_count = int(m[4]) if m[4] is not None else 1
            old, new = [], []
            i += 1
            while i < len(lines) and (len(old) < old_count or len(new) < new_count):
                body, tag = lines[i][1:], lines[i][:1]
                if tag in (" ", ""):
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                else:
                    raise PatchError(f"hunk at line {m[1]} of {path}: unexpected line {lines[i]!r}")
                i += 1
            if len(old) != old_count or len(new) != new_count:
                raise PatchError(f"hunk at line {m[1]} of {path}: {len(old)}/{len(new)} lines, header says "
                                 f"{old_count}/{new_count}")
            files[path].append((int(m[1]), old, new))
            continue
        i += 1
    if not files:
        raise PatchError("no file in the patch (expected '--- a/PATH' / '+++ b/PATH' and @@ hunks)")
    return files


def apply_hunks(text: str, hunks: list[tuple[int, list[str], list[str]]], name: str) -> str:
    """The patched text; PatchError naming the first context line that differs from the file."""
    lines = text.split("\n")
    for start, old, new in sorted(hunks, reverse=True):  # bottom-up: earlier line numbers stay valid
        for k, want in enumerate(old):
            at = start - 1 + k
            have = lines[at] if at < len(lines) else None
            if have != want:
                raise PatchError(f"{name}:{start + k}: expected {want!r}, found {have!r} (wrong checkout?)")
        lines[start - 1:start - 1 + len(old)] = new
    return "\n".join(lines)


def prepare_copy(code: Path, name: str, patch: Path | None, add: list[Path]) -> tuple[Path, str | None]:
    dest = Path.cwd() / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(code, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    digest = None
    if patch is not None:
        text = patch.read_text()
        digest = hashlib.sha256(text.encode()).hexdigest()
        for rel, hunks in parse_patch(text).items():
            target = dest / rel
            if not target.is_file():
                raise PatchError(f"{patch.name}: {rel} is not in {code}")
            target.write_text(apply_hunks(target.read_text(), hunks, rel))
    for extra in add:
        shutil.copy2(extra, dest / extra.name)
    return dest, digest


def collect(patterns: list[str], where: Path, since: float, into: Path) -> list[str]:
    """Copy what the program wrote (modified since `since`) under each pattern into `into`; the names copied."""
    copied = []
    for pattern in patterns:
        base = Path("/") if pattern.startswith("/") else where
        for found in sorted(base.glob(pattern.lstrip("/"))):
            files = [found] if not found.is_dir() else sorted(p for p in found.rglob("*") if not p.is_dir())
            for path in files:
                if path.is_symlink() or not path.is_file() or path.stat().st_mtime < since:
                    continue
                rel = path.relative_to(found.parent if pattern.startswith("/") else where)
                target = into / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied.append(rel.as_posix())
    return copied


class Child:
    """ARGV as a child, the stop signals passed on; one that comes before it starts means it never starts."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.stopped = 0  # the first stop signal received
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame) -> None:
        self.stopped = self.stopped or signum
        if self.proc is not None:
            self.proc.send_signal(signum)

    def run(self, command: list[str], where: Path) -> int:
        """Its exit status in `where` (128+N for signal N)."""
        if self.stopped:
            return 128 + self.stopped
        self.proc = subprocess.Popen(command, cwd=where)
        code = self.proc.wait()
        return code if code >= 0 else 128 - code


def make_scratch(code: Path, unlinked: set[str], run_folder: Path) -> Path:
    """A new folder under $TMPDIR linking to each entry of `code` but the `unlinked` names; ValueError when it
    would lie inside the run's folder (a bundle would pack what the program saves there)."""
    scratch, run_folder = Path(tempfile.mkdtemp(prefix="kit-scratch-")).resolve(), run_folder.resolve()
    if run_folder != Path(run_folder.anchor) and scratch.is_relative_to(run_folder):
        scratch.rmdir()
        raise ValueError(f"the scratch folder {scratch} lies inside the run's folder {run_folder} (TMPDIR): "
                         "set TMPDIR outside it")
    try:
        for entry in sorted(code.absolute().iterdir()):
            if entry.name not in unlinked:
                (scratch / entry.name).symlink_to(entry)
    except OSError:
        shutil.rmtree(scratch)
        raise
    return scratch


def clear_scratch(scratch: Path, kept: set[str]) -> dict:
    """Remove the scratch folder; what it held: every regular file but the `kept` ones (collected into outputs/),
    with its bytes (the links to the checkout are not followed)."""
    removed = []
    for folder, _dirs, names in os.walk(scratch):  # never descends into a linked folder
        for name in names:
            path = Path(folder) / name
            rel = path.relative_to(scratch).as_posix()
            if not path.is_symlink() and path.is_file() and rel not in kept:
                removed.append({"path": rel, "bytes": path.lstat().st_size})
    record = {"path": str(scratch), "removed": sorted(removed, key=lambda f: f["path"]),
              "bytes": sum(f["bytes"] for f in removed)}
    try:
        shutil.rmtree(scratch)
    except OSError as exc:
        record["error"] = f"not removed: {exc}"
    return record


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if "--" not in args_in:
        print("launch.py: give the command after --", file=sys.stderr)
        return EXIT_BAD_INPUT
    split = args_in.index("--")
    command = args_in[split + 1:]
    p = argparse.ArgumentParser(prog="launch.py")
    p.add_argument("--record", type=Path, required=True)
    p.add_argument("--meta", required=True)
    p.add_argument("--cwd", type=Path, required=True)
    p.add_argument("--checkout", type=Path)
    p.add_argument("--listing", type=Path)
    p.add_argument("--pythonpath", action="append", default=[])
    p.add_argument("--placeholder", action="append", default=[])
    p.add_argument("--scratch", action="store_true")
    p.add_argument("--unlinked", action="append", default=[])
    p.add_argument("--work-copy")
    p.add_argument("--patch", type=Path)
    p.add_argument("--add", type=Path, action="append", default=[])
    p.add_argument("--collect", action="append", default=[])
    args = p.parse_args(args_in[:split])
    meta = json.loads(args.meta)
    if not command or meta.get("argv") != command:
        print(f"launch.py: the command differs from the record's argv {meta.get('argv')}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.cwd.is_dir():
        print(f"launch.py: model code not found: {args.cwd} (pinned image, or a host's model_code root)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        listing = read_listing(args.listing.read_text()) if args.listing else None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"launch.py: {args.listing}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.pythonpath:  # the program's packages first, then what its host's Python finds
        os.environ["PYTHONPATH"] = os.pathsep.join([*args.pythonpath, *filter(None, [os.environ.get("PYTHONPATH")])])
    placed = placeholders(args.placeholder, command[0], args.cwd)
    child = Child() if args.collect or args.scratch else None
    where, digest, scratch = args.cwd, None, None
    try:
        if args.work_copy:
            where, digest = prepare_copy(args.cwd, args.work_copy, args.patch, args.add)
        if args.scratch:
            # a collected name at the top is written fresh there (an earlier run's copy in the checkout is not
            # linked); a deeper one keeps its top folder linked: the program may read what lies beside it
            fresh = {Path(c).parts[0] for c in args.collect if not c.startswith("/") and len(Path(c).parts) == 1}
            where = scratch = make_scratch(where, set(args.unlinked) | fresh, Path.cwd())
    except (PatchError, OSError, ValueError) as exc:
        print(f"launch.py: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    found = code_state(str(args.cwd), str(args.checkout or args.cwd), listing=listing)
    meta.update({
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "ran_in": str(where),
        "model_code_commit": found["commit"],
        "model_code_state": found,
        "patch_sha256": digest,
        "environ": redact(dict(os.environ)),
    })
    if args.placeholder:
        meta["placeholders"] = placed
    if scratch is not None:
        meta["scratch"] = {"path": str(scratch), "removed": None}  # known even if this process is killed
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()
    if child is not None:
        since, code = time.time() - 1, 127
        try:
            code = child.run(command, where)
        except OSError as exc:
            print(f"launch.py: cannot start {command[0]}: {exc}", file=sys.stderr)
        finally:  # a failed or stopped program's outputs too, and never a scratch folder left behind
            try:
                meta["outputs"] = collect(args.collect, where, since, args.record.parent / "outputs")
            finally:
                if scratch is not None:
                    meta["scratch"] = clear_scratch(scratch, set(meta.get("outputs", [])))
            meta["exit_code"] = code
            args.record.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        return code
    os.chdir(where)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"launch.py: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
