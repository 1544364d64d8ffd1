#!/usr/bin/env python3
"""Start one published benchmark program exactly as given, after recording it beside its log.

    python3 launch.py --record LOG_STEM.cmd.json --meta JSON --cwd MODEL_DIR \
        [--work-copy NAME --patch FILE --add FILE ...] [--collect PATH ...] -- ARGV...

--meta is the kit's description of the run (kit.run.reference.record: argv, env, methods, ...); ARGV must
equal its "argv". The record adds what only this host knows: time, host name, the model code's git
commit, the patch's sha256, and the whole environment (values of secret-looking names redacted).
--work-copy NAME copies MODEL_DIR to ./NAME (a fresh copy each run; the checkout stays untouched),
applies --patch there (every context line must match at its stated line: no offset, no fuzz) and
copies each --add file into it (DLPerf ran PLSC's train.py from inside the checkout). Then this
process becomes ARGV in MODEL_DIR (or the copy): its output is the run's log. With --collect (files the
program writes besides its output: DLLogger/raport JSON, a results folder; relative to where it runs, or
absolute) ARGV runs as a child instead (SIGTERM/SIGINT/SIGHUP passed on), and what it wrote there during
the run is copied to outputs/ beside the record (regular files only, links never followed), listed in
the record's "outputs"; the exit status is the program's.
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
import time
from pathlib import Path

SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH", "COOKIE")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
EXIT_BAD_INPUT = 2


class PatchError(ValueError):
    pass


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


def git_commit(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


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


def run_child(command: list[str], where: Path) -> int:
    """ARGV as a child in `where`, the stop signals passed on; its exit status (128+N for signal N)."""
    child = subprocess.Popen(command, cwd=where)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    return code if code >= 0 else 128 - code


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
    where, digest = args.cwd, None
    if args.work_copy:
        try:
            where, digest = prepare_copy(args.cwd, args.work_copy, args.patch, args.add)
        except (PatchError, OSError) as exc:
            print(f"launch.py: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    meta.update({
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "ran_in": str(where),
        "model_code_commit": git_commit(args.cwd),
        "patch_sha256": digest,
        "environ": redact(dict(os.environ)),
    })
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()
    if args.collect:
        since = time.time() - 1
        try:
            code = run_child(command, where)
        except OSError as exc:
            print(f"launch.py: cannot start {command[0]}: {exc}", file=sys.stderr)
            return 127
        meta["outputs"] = collect(args.collect, where, since, args.record.parent / "outputs")
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
