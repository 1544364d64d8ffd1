"""Auditor bundle: one tar.gz of a run, sha256 manifest, optional OpenSSH signature; verify = recompute all.

    kit-bundle-<run_id>/
      run/<run_id>/...      the run directory whole: every raw log (all repeats, ranks, failed attempts),
                            env captures (raw + parsed), suite.yaml, run.json (commands), images.json,
                            results.json, report.md, CSV, plots (not report.html: a page `kit report`
                            renders again from these; verify never judges it)
      system.json           MLPerf Training system_desc fields, filled from the captures (kit.audit.sysdesc)
      commands.json         the exact command line and environment of every run (per host)
      provenance.json       kit version + git commit, pins sha256, rules version, redactions, links
      pins.yaml             docker/pins.yaml as it was when bundled
      claims/...            published claims + their logs (optional, `--claims`)
      manifest.json         schema_version + sha256 and size of every file above (+ its own digest)
      manifest.json.sig     `ssh-keygen -Y sign -n kit-bundle` of manifest.json (optional)

Secret values (kit.audit.redact) are replaced by <redacted> in the bundled copies (never in the run directory);
provenance.json lists each redaction. Links are never followed: one whose target lies inside the run is listed
in provenance.json "links" (its target is packed once, under its own name); one pointing outside refuses the bundle.
Unpacking stops, before anything is extracted, past a total size or a compression ratio (decompression bombs).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit import REPO_ROOT, __version__
from kit.audit import sweep as sw
from kit.audit.commands import recorded_commands
from kit.audit.redact import redact_text
from kit.audit.rules.engine import rules_of_run
from kit.audit.unpack import (  # noqa: F401  (re-exported: the bundle's reader)
    MANIFEST,
    MAX_RATIO,
    MAX_UNPACKED_BYTES,
    BundleError,
    NotABundle,
    refuse_non_bundle_folder,
    unpack,
)
from kit.core import rundir
from kit.core.files import stamped, write_json, write_text
from kit.core.inputs import InputError, parse_json
from kit.core.revision import source_revision
from kit.core.rundir import has_results, has_run_meta, is_sweep, read_run, read_run_meta
from kit.core.runlock import LOCK_NAME, holder, is_busy
from kit.results.compose import completion_of
from kit.results.html import HTML_NAME

NAMESPACE = "kit-bundle"
SIGNATURE = "manifest.json.sig"
SELF_KEY = "manifest_sha256"
ZERO_DIGEST = "0" * 64


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _redacted(src: Path, rel: str, redactions: list[dict]) -> bytes:
    """The bytes a file is bundled as: a text's with its secret values replaced (each listed in redactions), a
    binary file's (plots) as they are."""
    with open(os.open(src, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:  # a link swapped in since the walk: refused
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data  # binary (plots): nothing to redact
    clean, found = redact_text(text)
    redactions += [{"file": rel, "line": line, "key": key} for line, key in found]
    return clean.encode("utf-8") if found else data


class _Packer:
    """Members written straight into the bundle's tar (no copy on disk), each file's sha256 and size kept for the
    manifest; the folders above a file get their own member before it."""

    def __init__(self, tar: tarfile.TarFile, top: str):
        self.tar, self.top = tar, top
        self.folders: set[str] = set()
        self.files: dict[str, dict] = {}  # path in the bundle -> {"sha256", "bytes"}

    def _member(self, rel: str, kind: bytes, size: int = 0) -> tarfile.TarInfo:
        info = tarfile.TarInfo(f"{self.top}/{rel}")
        info.type, info.size, info.mode, info.mtime = kind, size, 0o755 if kind == tarfile.DIRTYPE else 0o644, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    def add(self, rel: str, data: bytes, listed: bool = True) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder not in self.folders:
                self.folders.add(folder)
                self.tar.addfile(self._member(folder, tarfile.DIRTYPE))
        self.tar.addfile(self._member(rel, tarfile.REGTYPE, len(data)), io.BytesIO(data))
        if listed:
            self.files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _describes_system(rel: str, parts: tuple[str, ...] = ("",)) -> bool:
    """The files of a run system_description reads (its env captures, logs, images.json and run.json); of a sweep,
    those of each of its run directories PARTS ('hosts/h1/', ...)."""
    def of_run(inside: str) -> bool:
        return inside.startswith("env/") or (inside.startswith("logs/") and inside.endswith(".log")) \
            or inside in ("images.json", "run.json")
    return any(rel.startswith(part) and of_run(rel[len(part):]) for part in parts)


# --------------------------------------------------------------------------- making a bundle


def system_description(run_dir: Path, pins_file: Path | None, submitter: str, system_name: str,
                       shown: str | Path | None = None) -> dict:
    """The system description of a run from its env captures, logs, images.json and pins; errors name the run
    folder as `shown` (the run itself, not the temporary copy read)."""
    from kit.audit import sysdesc
    from kit.hosts import capture as ec
    from kit.results.parsers.kitlog import read_run_start

    captures = [ec.capture_from_dir(d.name, d) for d in sorted((run_dir / "env").iterdir()) if d.is_dir()] \
        if (run_dir / "env").is_dir() else []
    if not captures:
        raise BundleError(f"{Path(shown or run_dir) / 'env'}: no environment captures (probes.json + raw outputs) "
                          "to describe the system from; runs made by kit bench/multinode write them")
    frameworks = {}
    for log in sorted((run_dir / "logs").rglob("*.log")):
        start = read_run_start(log) or {}
        if start.get("framework_version"):
            frameworks[start["framework"]] = start["framework_version"]
    software = software_stack(run_dir, pins_file)
    return sysdesc.describe(captures, submitter=submitter, system_name=system_name, frameworks=frameworks,
                            software=software)


def software_stack(run_dir: Path, pins_file: Path | None) -> dict[str, str]:
    """CUDA/cuDNN/NCCL/DALI/Python of the images the run used (pins), or the host's Python for native runs."""
    images = _json_object(run_dir / "images.json", "images.json").get("images") or {}
    stack: dict[str, str] = {}
    entries = images.values() if isinstance(images, dict) else ()
    specs = [e.get("image") for e in entries if isinstance(e, dict) and isinstance(e.get("image"), str)]
    if specs and pins_file is not None and pins_file.is_file():
        from kit.images.spec import load_pins

        pins = load_pins(pins_file)
        for key in sorted(set(specs)):
            try:
                versions = pins.get(key).versions
            except KeyError:
                continue
            for name in ("cuda", "cudnn", "nccl", "dali", "python"):
                if versions.get(name):
                    stack[name] = " / ".join(sorted({*stack.get(name, "").split(" / "), versions[name]} - {""}))
    python = read_run(run_dir).host.get("python")
    if "python" not in stack and isinstance(python, str):
        stack["python"] = python
    return stack


def _json_object(path: Path, shown: str | Path) -> dict:
    """A JSON object file of a run ({} when there is none); BundleError naming it as `shown` otherwise."""
    if not path.is_file():
        return {}
    try:
        data = parse_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{shown}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BundleError(f"{shown}: not a JSON object")
    return data


def run_files(run_dir: Path, tops: tuple[Path, ...] = ()) -> tuple[list[Path], dict[str, str]]:
    """The run's regular files (not its lock, nor report.html: a rendering of the files bundled; nor those of the
    run directories TOPS inside it, a sweep's), never reached through a link, and its links {link: target relative
    to the run}; a link whose target lies outside the run refuses the bundle (nothing outside the run is ever read)."""
    files, links = [], {}
    left_out = {top / name for top in (run_dir, *tops) for name in (LOCK_NAME, HTML_NAME)}
    for folder, dirs, names in os.walk(run_dir):  # does not descend into linked folders
        for name in dirs + names:
            path = Path(folder) / name
            if path.is_symlink():
                target = Path(os.path.realpath(path))
                if not target.is_relative_to(run_dir):
                    raise BundleError(f"{path}: a link to {target}, outside the run; remove it or copy the file in")
                links[path.relative_to(run_dir).as_posix()] = target.relative_to(run_dir).as_posix()
            elif name in names and not name.endswith(".tmp") and path not in left_out:
                if not path.is_file():
                    raise BundleError(f"{path}: not a regular file (a pipe, socket or device); remove it")
                files.append(path)
    return sorted(files), dict(sorted(links.items()))


def _claims_files(claims: Path) -> list[Path]:
    """The claims file and every log or folder its entries point at (relative to the claims file)."""
    from kit.results.crosscheck import load_claims

    _, suites, logs = load_claims(claims)
    base = claims.parent
    files = [claims]
    for entry in logs:  # `file`, or `files` (runs a publisher averaged)
        files += [base / name for name in entry["files"]] if "files" in entry else [base / entry["file"]]
    for entry in suites:
        folder = base / (entry.get("dir") or entry["name"])
        files += sorted(p for p in folder.rglob("*") if p.is_file())
    for f in files:
        if not f.is_file():
            raise BundleError(f"{claims}: refers to {f}, which does not exist")
    return files


def make_bundle(run_dir: Path, out: Path | None = None, *, sign_key: Path | None = None,
                submitter: str | None = None, system_name: str | None = None, claims: Path | None = None,
                pins_file: Path | None = None, rules_version: str | None = None, force: bool = False,
                progress=None) -> Path:
    """Write <out> (default: <run_dir>.bundle.tar.gz) of a run directory, or of a sweep's (kit.audit.sweep: each
    host's run directory as a run's, system.json and commands.json per row); the directory is only read."""
    run_dir = Path(run_dir).resolve()
    swept = is_sweep(run_dir)
    if swept:
        parts = bundled_parts(run_dir)  # {row: its run directory}, each as bundlable as a run
    elif not has_run_meta(run_dir) or not (run_dir / "logs").is_dir():
        raise BundleError(f"{run_dir}: not a run directory (needs run.json and logs/) nor a sweep's (sweep.json)")
    else:
        parts = {"": run_dir}
    out = output_path(Path(out) if out else run_dir.parent / f"{run_dir.name}.bundle.tar.gz", run_dir, force)
    pins_file = pins_file or REPO_ROOT / "docker" / "pins.yaml"
    metas = {row: _run_meta(part) for row, part in parts.items()}
    if not swept:
        check_bundlable(run_dir)
    meta = metas.get("") or next(iter(metas.values()), {})  # a sweep's kit commit: its first row's
    rules_version = rules_version or (sw.rules_of_sweep(metas)[0] if swept else rules_of_run(meta)[0])
    prefixes = tuple(f"{part.relative_to(run_dir).as_posix()}/" for part in parts.values()) if swept else ("",)
    top = f"kit-bundle-{run_dir.name}"
    files, links = run_files(run_dir, tuple(parts.values()))
    claimed = []
    if claims is not None:
        claims = Path(claims).resolve()
        for src in _claims_files(claims):
            rel, real = f"claims/{os.path.relpath(src, claims.parent)}", Path(os.path.realpath(src))
            if rel.startswith("claims/../") or not real.is_relative_to(claims.parent):
                raise BundleError(f"{claims}: {src} lies outside the claims file's folder")
            claimed.append((rel, real))
    out.parent.mkdir(parents=True, exist_ok=True)
    # Each file is read once, redacted, hashed and packed at once: the run is never copied to disk, but for the
    # few files the system description is read from (`view`, redacted as bundled). The bundle's own files (root)
    # follow the run's, the manifest last.
    with tempfile.TemporaryDirectory(prefix="kit-bundle-") as tmp:
        root, view = Path(tmp) / top, Path(tmp) / "view" / top
        root.mkdir()
        redactions: list[dict] = []
        handle, partial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
        try:
            with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
                pack = _Packer(tar, top)
                for rel, real in claimed:
                    pack.add(rel, _redacted(real, rel, redactions))
                for i, src in enumerate(files):
                    inside = src.relative_to(run_dir).as_posix()
                    rel = f"run/{run_dir.name}/{inside}"
                    data = _redacted(src, rel, redactions)
                    pack.add(rel, data)
                    if _describes_system(inside, prefixes):
                        (view / rel).parent.mkdir(parents=True, exist_ok=True)
                        (view / rel).write_bytes(data)
                    if progress:
                        progress("copy", i + 1, len(files))
                if pins_file.is_file():
                    shutil.copyfile(pins_file, root / "pins.yaml")
                submitter = submitter or os.environ.get("USER") or "unknown"
                if swept:  # each row's run directory its own system, its own commands
                    system, commands = sweep_systems(view / "run" / run_dir.name, parts, run_dir, root / "pins.yaml",
                                                  submitter, system_name), sw.commands(metas)
                else:
                    system = system_description(view / "run" / run_dir.name, root / "pins.yaml", submitter,
                                                system_name or (meta.get("host") or {}).get("hostname") or
                                                run_dir.name, shown=run_dir)
                    commands = recorded_commands(meta)
                for name, data in (("system.json", system), ("commands.json", commands)):
                    write_text(root / name, json.dumps(data, indent=2, sort_keys=True) + "\n")  # unversioned
                write_json(root / "provenance.json", {
                    "kit_version": __version__,
                    "kit_commit_at_run": meta.get("kit_commit"), "kit_commit_at_bundle": source_revision(),
                    "bundled": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                    "run_id": run_dir.name, "rules_version": rules_version,
                    "pins_sha256": sha256_file(root / "pins.yaml") if (root / "pins.yaml").is_file() else None,
                    "claims": f"claims/{claims.name}" if claims else None, "redactions": redactions,
                    "links": links, **_reproduction_of(run_dir),
                }, MANIFEST, sort_keys=True)
                for path in sorted(root.iterdir()):
                    pack.add(path.name, path.read_bytes())
                write_text(root / MANIFEST, _manifest_text(pack.files))
                if sign_key is not None:
                    sign(root / MANIFEST, Path(sign_key))
                for name in (MANIFEST, SIGNATURE):
                    if (root / name).is_file():
                        pack.add(name, (root / name).read_bytes(), listed=False)
            os.chmod(partial, 0o644)
            os.replace(partial, out)
        finally:
            Path(partial).unlink(missing_ok=True)
    return out


def _run_meta(run_dir: Path) -> dict:
    try:
        return read_run_meta(run_dir)
    except InputError as exc:
        raise BundleError(str(exc)) from None


def check_bundlable(run_dir: Path, partial_why: str | None = None, resume: str | None = None) -> None:
    """BundleError unless the run directory is finished: no kit process writes it, its report written, every run
    kit bench planned ended; PARTIAL_WHY: why it may have ended early (a sweep's row that failed or was lost), RESUME
    the command that finishes it."""
    if is_busy(run_dir):
        raise BundleError(f"{run_dir}: a kit process still writes it ({holder(run_dir)}); bundle it when it ends")
    if partial_why:
        return
    if not has_results(run_dir):
        raise BundleError(f"{run_dir}: an unfinished run (no results.json: kit bench stopped before its report); "
                          f"finish it with `{resume or f'kit bench --resume {run_dir}'}`, then bundle it")
    completion = completion_of(run_dir)
    if completion is not None and not completion.complete:  # a partial run never passes for a whole one
        raise BundleError(f"{run_dir}: {completion.line()} Bundle it when it is finished"
                          + (f" (`{resume}`)" if resume else ""))


def bundled_parts(sweep_dir: Path) -> dict[str, Path]:
    """{row: its run directory} of a finished sweep, each as finished as a run's bundle asks (a row the sweep
    records as failed or lost may have ended early); BundleError naming what is not."""
    try:
        record = rundir.read_sweep(sweep_dir)
    except InputError as exc:
        raise BundleError(str(exc)) from None
    resume = f"kit sweep --resume {sweep_dir}"
    if "finished" not in record:
        raise BundleError(f"{sweep_dir}: an unfinished sweep (sweep.json records no end); finish it with `{resume}`, "
                          "then bundle it")
    if not rundir.has_results(sweep_dir):
        raise BundleError(f"{sweep_dir}: no results.json (the fleet table); `kit report {sweep_dir}` writes it")
    rows = record.get("rows") or {}
    parts = {}
    for row, part in rundir.sweep_parts(sweep_dir).items():
        if has_run_meta(part):
            status = (rows.get(row) or {}).get("status")
            check_bundlable(part, None if status == sw.OK else f"the sweep records it {status}", resume)
            parts[row] = part
    return parts


def sweep_systems(view: Path, parts: dict[str, Path], sweep_dir: Path, pins: Path, submitter: str,
            system_name: str | None) -> dict[str, dict]:
    """system.json of a sweep: {row: the system description of its run directory} (each row's system name its
    host's, unless one is given), read from VIEW, the sweep's files as bundled."""
    return {row: system_description(view / part.relative_to(sweep_dir), pins, submitter,
                                    system_name or row.split("/")[0], shown=part) for row, part in parts.items()}


def _reproduction_of(run_dir: Path) -> dict:
    """provenance.json's `reproduction_of` (the digest of the bundle a `kit reproduce` run reproduced), where the run
    is one (kit.audit.pair)."""
    from kit.audit import pair

    digest = pair.reproduction_of(run_dir)
    return {pair.PROVENANCE_KEY: digest} if digest else {}


def output_path(out: Path, run_dir: Path, force: bool) -> Path:
    """Where the bundle may be written: never inside the run it packs, never over a link, folder or device,
    and over an existing file only with force."""
    out = Path(os.path.abspath(out))
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise BundleError(f"{out}: exists and is not a regular file (a link, folder or device); give another path")
    if out.exists() and not force:
        raise BundleError(f"{out}: exists; give another path or --force to replace it")
    parent = out.parent.resolve()
    if parent == run_dir or parent.is_relative_to(run_dir):
        raise BundleError(f"{out}: inside the run directory being bundled; write the bundle elsewhere")
    return parent / out.name


def write_manifest(root: Path) -> Path:
    files = {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
             for p in sorted(root.rglob("*")) if p.is_file() and p.name not in (MANIFEST, SIGNATURE)}
    return write_text(root / MANIFEST, _manifest_text(files))


def _manifest_text(files: dict[str, dict]) -> str:
    """manifest.json of these files ({path: {"sha256", "bytes"}}), its own digest in it (see manifest_self_ok)."""
    body = stamped(MANIFEST, {"hash": "sha256", "kit_version": __version__, "files": files, SELF_KEY: ZERO_DIGEST})
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return text.replace(ZERO_DIGEST, digest, 1)


def manifest_digest(root: Path) -> str | None:
    """A bundle's name: its manifest's own sha256 (the same in its .tar.gz and unpacked); None where the manifest
    does not read or its digest does not match its bytes."""
    try:
        raw = (Path(root) / MANIFEST).read_bytes()
        digest = parse_json(raw).get(SELF_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) and manifest_self_ok(raw) else None


def manifest_self_ok(raw: bytes) -> bool:
    """The manifest's own digest: sha256 of its bytes with that digest written as 64 zeros."""
    m = re.search(rb'"' + SELF_KEY.encode() + rb'": "([0-9a-f]{64})"', raw)
    if not m:
        return False
    zeroed = raw[:m.start(1)] + ZERO_DIGEST.encode() + raw[m.end(1):]
    return hashlib.sha256(zeroed).hexdigest() == m.group(1).decode()


# --------------------------------------------------------------------------- OpenSSH signatures


def _ssh_keygen(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    if shutil.which("ssh-keygen") is None:
        raise BundleError("ssh-keygen not found (OpenSSH client): needed to sign or check a bundle signature")
    return subprocess.run(["ssh-keygen", *args], input=stdin, capture_output=True, timeout=60)


def sign(manifest: Path, key: Path) -> Path:
    key = Path(key).expanduser()
    if not key.is_file():
        raise BundleError(f"{key}: no such signing key")
    done = _ssh_keygen(["-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(manifest)], stdin=b"")
    if done.returncode != 0:
        raise BundleError(f"ssh-keygen -Y sign with {key} failed: {done.stderr.decode(errors='replace').strip()} "
                          "(a key with a passphrase must be in ssh-agent; pass its .pub file)")
    return manifest.with_name(SIGNATURE)


@dataclass
class SignatureCheck:
    state: str  # unsigned | valid | invalid | unchecked
    detail: str


def _signing_key(sig: Path, data: bytes) -> str | None:
    """The signing key's SHA256 fingerprint, as ssh-keygen -Y check-novalidate reports it."""
    done = _ssh_keygen(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], stdin=data)
    m = re.search(r"SHA256:[A-Za-z0-9+/]+", (done.stdout + done.stderr).decode(errors="replace"))
    return m.group(0) if done.returncode == 0 and m else None


def _principals_of_key(allowed_signers: Path, fingerprint: str | None) -> list[str]:
    """Every plain principal (no wildcard) listed with the key of that fingerprint in an allowed-signers file."""
    if fingerprint is None:
        return []
    found = []
    for line in Path(allowed_signers).read_text(errors="replace").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        at = next((i for i, w in enumerate(words) if re.fullmatch(r"(ssh|ecdsa|sk|rsa)-[\w@.-]+", w)), None)
        if at is None or at + 1 >= len(words):
            continue
        try:
            blob = base64.b64decode(words[at + 1], validate=True)
        except ValueError:
            continue
        if "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=") == fingerprint:
            found += [p for p in words[0].split(",") if p and not any(c in p for c in "*?!")]
    return found


def check_signature(root: Path, allowed_signers: Path | None) -> SignatureCheck:
    sig, manifest = root / SIGNATURE, root / MANIFEST
    if not sig.is_file():
        if allowed_signers is not None:
            return SignatureCheck("invalid", "missing, but --allowed-signers asks for a signed bundle")
        return SignatureCheck("unsigned", "the bundle is not signed")
    data = manifest.read_bytes()
    if allowed_signers is None:
        done = _ssh_keygen(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], stdin=data)
        if done.returncode != 0:
            return SignatureCheck("invalid", f"does not verify over {MANIFEST}: "
                                  f"{done.stderr.decode(errors='replace').strip()[:300]}")
        return SignatureCheck("unchecked", "signature is intact, but whose it is was not checked "
                                           "(give --allowed-signers FILE)")
    found = _ssh_keygen(["-Y", "find-principals", "-f", str(allowed_signers), "-s", str(sig)])
    principals = found.stdout.decode(errors="replace").split()
    said = [line.strip() for line in found.stderr.decode(errors="replace").splitlines()
            if line.strip() and "no principal matched" not in line.lower()]
    if found.returncode != 0 or not principals:
        # ssh-keygen says why a line of the auditor's file was skipped ("bad options" ...): never hide it
        detail = f" (ssh-keygen: {'; '.join(said)[:300]})" if said else ""
        return SignatureCheck("invalid", f"signed by a key that {allowed_signers} does not allow{detail}")
    failures = []
    # find-principals names only the first line with the key; the same key may be listed again under principals
    # for other namespaces, so every principal listed with the signing key is tried
    principals += [p for p in _principals_of_key(allowed_signers, _signing_key(sig, data)) if p not in principals]
    for principal in principals:
        done = _ssh_keygen(["-Y", "verify", "-f", str(allowed_signers), "-I", principal, "-n", NAMESPACE,
                            "-s", str(sig)], stdin=data)
        if done.returncode == 0:
            return SignatureCheck("valid", f"good signature by {principal} ({NAMESPACE})")
        failures.append(f"{principal}: {done.stderr.decode(errors='replace').strip()[:200]}")
    return SignatureCheck("invalid", f"does not verify over {MANIFEST} for any allowed principal: "
                          + "; ".join(failures)[:400])


# --------------------------------------------------------------------------- reading a bundle
