"""The kit's images, for real: base image, build, registry push, delivery to hosts, verification.

    make_base(client, spec)                       debootstrap + docker import (no registry needed)
    built = build(client, spec)                   context assembled here; streamed progress; tag by hash
    push(client, built.ref, "127.0.0.1:5000")     -> the registry's manifest digest
    deliver_stream(inv, hosts, built.ref, ...)    docker save | ssh host docker load, every host at once
    deliver_registry(inv, hosts, ref, pull_ref)   docker pull on every host at once
    verify_hosts(inv, hosts, ref, built.id)       the same image ID on every host, or ImageMismatch
    record(run_dir, ...)                          runs/<id>/images.json: what ran where

Hosts holding the same image ID are skipped. Remote commands are built with quote_cmd only.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import hashlib
import io
import json
import os
import queue
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit import REPO_ROOT
from kit.config.hosts import HostConfig, Inventory
from kit.core.inputs import KitError
from kit.hosts.connect import InventoryError, connect, quote_cmd
from kit.images.spec import ImageSpec, Pins, drift, image_tag, lock_drift, render

CONTEXT_FILES = ("scripts/verify_pins.py",)
CONTEXT_DIRS = ("scripts/harness",)
CACHE_DIR = Path(os.environ.get("KIT_CACHE_DIR", Path.home() / ".cache" / "kit"))
LOCAL_WHEELS = Path("/opt/wheels")  # a machine's own wheel folder (e.g. the CPU build of torch), when present
DEBIAN_MIRROR = "http://deb.debian.org/debian"
CHUNK = 1 << 20

Progress = Callable[[str, str], None]  # (who: "build" / host name, line)


class ImageError(KitError):
    """A build, push, delivery or verification that did not succeed; str() says where and why."""


class ImageMismatch(ImageError):
    def __init__(self, ref: str, expected: str, wrong: dict[str, str | None]):
        self.ref, self.expected, self.wrong = ref, expected, wrong
        parts = [f"{h}: {'missing' if i is None else i[:19]}" for h, i in wrong.items()]
        super().__init__(f"{ref}: not the same image on every host (expected {expected[:19]}): " + "; ".join(parts))


@dataclass
class Built:
    ref: str
    id: str
    spec_key: str
    pins_hash: str
    context_digest: str
    seconds: float = 0.0
    cached: bool = False


@dataclass
class HostImage:
    host: str
    action: str  # "skipped" (already there), "loaded", "pulled", "failed"
    id: str | None = None
    seconds: float = 0.0
    error: str = ""


def _quiet(who: str, line: str) -> None:
    pass


# ---- the docker engine here -----------------------------------------------------------------


def docker_client(base_url: str | None = None):
    import docker

    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, PermissionError...
        where = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise ImageError(f"no Docker engine at {where} ({type(exc).__name__}: {exc}); start one "
                         "(e.g. dockerd --iptables=false --bridge=none) or set DOCKER_HOST") from None
    return client


def image_id(client, ref: str) -> str | None:
    import docker

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


# ---- base image -------------------------------------------------------------------------------


def make_base(client, spec: ImageSpec, progress: Progress = _quiet, mirror: str = DEBIAN_MIRROR,
              force: bool = False) -> str:
    """The cpu image's base (kit/debian:bookworm-minbase): debootstrap minbase, then docker import."""
    ref = f"{spec.base.image}:{spec.base.tag}"
    if not force and (have := image_id(client, ref)):
        progress("base", f"{ref} is already here ({have[:19]})")
        return have
    if spec.base.image != "kit/debian":
        raise ImageError(f"{ref}: only the kit's own debootstrap base can be made here; pull this one")
    if shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists():
        raise ImageError("debootstrap is not installed (Debian package debootstrap; scripts/install_system_deps.sh)")
    suite = spec.base.tag.split("-", 1)[0]
    with tempfile.TemporaryDirectory(prefix="kit-base-") as tmp:
        root = Path(tmp) / "rootfs"
        progress("base", f"debootstrap --variant=minbase {suite} {mirror}")
        proc = subprocess.run(["debootstrap", "--variant=minbase", suite, str(root), mirror],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise ImageError(f"debootstrap {suite} failed (exit {proc.returncode}): " + " | ".join(tail))
        tar_path = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tar_path), "."], check=True)
        progress("base", f"docker import -> {ref}")
        client.api.import_image_from_file(str(tar_path), repository=spec.base.image, tag=spec.base.tag)
    return image_id(client, ref) or ""


# ---- build ------------------------------------------------------------------------------------


def wheelhouse(spec: ImageSpec, lock: Path = REPO_ROOT / "requirements.lock", cache: Path = CACHE_DIR,
               progress: Progress = _quiet) -> Path:
    """The pinned wheels and their dependencies for a pip-installing image (constrained by the lock)."""
    key = hashlib.sha256(json.dumps([spec.pip, lock.read_text()], sort_keys=True).encode()).hexdigest()[:16]
    out = cache / "wheels" / key
    if (out / ".complete").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    py = spec.versions["python"].split(".")
    platforms = [f"manylinux_2_{n}_x86_64" for n in range(5, 37)] + ["manylinux1_x86_64", "manylinux2010_x86_64",
                                                                     "manylinux2014_x86_64", "linux_x86_64"]
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--dest", str(out),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", f"{py[0]}.{py[1]}",
            *[a for p in platforms for a in ("--platform", p)], "-c", str(lock)]
    if LOCAL_WHEELS.is_dir():
        argv += ["--find-links", str(LOCAL_WHEELS)]
    argv += [f"{d}=={v}" for d, v in spec.pip.items()]
    progress("build", f"downloading wheels into {out}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError("pip download failed: " + " | ".join(proc.stderr.strip().splitlines()[-4:]))
    (out / ".complete").write_text("\n".join(sorted(p.name for p in out.glob("*.whl"))) + "\n")
    return out


def _context_members(spec: ImageSpec, root: Path, wheels: Path | None) -> list[tuple[str, Path | bytes]]:
    members: list[tuple[str, Path | bytes]] = [("Dockerfile", render(spec).encode())]
    for rel in CONTEXT_FILES:
        members.append((rel, root / rel))
    for rel in CONTEXT_DIRS:
        for path in sorted((root / rel).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".md"):
                members.append((path.relative_to(root).as_posix(), path))
    if wheels is not None:
        for path in sorted(wheels.glob("*.whl")):
            members.append((f"wheels/{path.name}", path))
    return members


def build_context(spec: ImageSpec, out: Path, root: Path = REPO_ROOT, wheels: Path | None = None) -> str:
    """A deterministic tar (fixed owner and mtime) of exactly what the Dockerfile copies -> its digest."""
    digest = hashlib.sha256()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, src in _context_members(spec, root, wheels):
            data = src if isinstance(src, bytes) else None
            info = tarfile.TarInfo(name)
            info.mode = 0o755 if isinstance(src, Path) and os.access(src, os.X_OK) else 0o644
            info.size = len(data) if data is not None else src.stat().st_size
            file_hash = hashlib.sha256()
            if data is not None:
                file_hash.update(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                with open(src, "rb") as f:
                    for block in iter(lambda: f.read(CHUNK), b""):
                        file_hash.update(block)
                with open(src, "rb") as f:
                    tar.addfile(info, f)
            digest.update(f"{name}\0{info.mode:o}\0{file_hash.hexdigest()}\n".encode())
    return digest.hexdigest()


def build(client, spec: ImageSpec, progress: Progress = _quiet, root: Path = REPO_ROOT,
          cache: Path = CACHE_DIR, tag: str | None = None) -> Built:
    """Build one image from its rendered Dockerfile; the build fails if verify_pins.py finds a mismatch."""
    t0 = time.monotonic()
    wheels = wheelhouse(spec, cache=cache, progress=progress) if spec.name == "cpu" else None
    with tempfile.TemporaryDirectory(prefix="kit-context-") as tmp:
        ctx = Path(tmp) / "context.tar"
        context_digest = build_context(spec, ctx, root, wheels)
        ref = tag or image_tag(spec, context_digest)
        existing = image_id(client, ref)
        if existing:
            progress("build", f"{ref} is already built ({existing[:19]})")
            return Built(ref, existing, spec.key, spec.pins_hash(), context_digest, time.monotonic() - t0, True)
        progress("build", f"building {ref} from {spec.dockerfile} (context {ctx.stat().st_size / 1e6:.0f} MB)")
        tail: list[str] = []
        with open(ctx, "rb") as f:
            stream = client.api.build(fileobj=f, custom_context=True, tag=ref, rm=True, forcerm=True,
                                      network_mode="host", pull=False, decode=True)
            for chunk in stream:
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            tail = (tail + [line])[-40:]
                            progress("build", line)
                if "error" in chunk:
                    mismatches = [t for t in tail if "MISMATCH" in t or "do not hold" in t]
                    detail = " | ".join(mismatches) or " | ".join(tail[-5:])
                    raise ImageError(f"building {spec.key} failed: {chunk['error'].strip()}"
                                     + (f" -- {detail}" if detail else ""))
    built_id = image_id(client, ref)
    if built_id is None:
        raise ImageError(f"building {spec.key}: the engine reported success but has no {ref}")
    return Built(ref, built_id, spec.key, spec.pins_hash(), context_digest, time.monotonic() - t0, False)


# ---- registry ---------------------------------------------------------------------------------


def push(client, ref: str, registry: str, progress: Progress = _quiet) -> tuple[str, str]:
    """Tag ref as <registry>/<ref> and push it -> (registry ref, manifest digest sha256:...)."""
    target = f"{registry}/{ref}"
    repo, tag = target.rsplit(":", 1)
    client.images.get(ref).tag(repo, tag)
    digest = ""
    try:
        for chunk in client.api.push(repo, tag, stream=True, decode=True):
            if "error" in chunk:
                raise ImageError(f"push {target} failed: {chunk['error'].strip()}")
            if "aux" in chunk and "Digest" in chunk["aux"]:
                digest = chunk["aux"]["Digest"]
            if chunk.get("status") and chunk.get("id"):
                progress("push", f"{chunk['id']}: {chunk['status']}")
    except ImageError:
        raise
    except Exception as exc:  # requests' ConnectionError etc.
        raise ImageError(f"push {target} failed: {exc}") from None
    if not digest:
        raise ImageError(f"push {target}: the registry reported no manifest digest")
    progress("push", f"{target}@{digest}")
    return target, digest


# ---- hosts ------------------------------------------------------------------------------------


def remote_image_id(conn, ref: str) -> str | None:
    res = conn.run(quote_cmd(["docker", "image", "inspect", "--format", "{{.Id}}", ref]), hide=True, warn=True,
                   in_stream=False)
    out = res.stdout.strip()
    if res.exited == 0 and out.startswith("sha256:"):
        return out
    err = (res.stderr or "").strip()
    if "No such image" in err or "no such image" in err.lower():
        return None
    raise ImageError(f"docker on {conn.host}: {err.splitlines()[-1] if err else f'exit {res.exited}'}")


def _on_hosts(hosts: list[HostConfig], fn: Callable[[HostConfig], HostImage]) -> dict[str, HostImage]:
    with cf.ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        futures = {h.name: pool.submit(fn, h) for h in hosts}
    out = {}
    for name, fut in futures.items():
        try:
            out[name] = fut.result()
        except (InventoryError, ImageError) as exc:
            out[name] = HostImage(name, "failed", error=str(exc))
    return out


def _inspect_all(inv: Inventory, hosts: list[HostConfig], ref: str) -> dict[str, HostImage]:
    def one(host: HostConfig) -> HostImage:
        with connect(host, inv) as conn:
            return HostImage(host.name, "inspected", remote_image_id(conn, ref))

    return _on_hosts(hosts, one)


def host_ids(inv: Inventory, hosts: list[HostConfig], ref: str) -> dict[str, str | None]:
    """Every host's image ID under ref (None: not there); ImageError if a host cannot be asked."""
    results = _inspect_all(inv, hosts, ref)
    failed = {n: r.error for n, r in results.items() if r.action == "failed"}
    if failed:
        raise ImageError("cannot inspect images on " + "; ".join(f"{n}: {e}" for n, e in failed.items()))
    return {n: r.id for n, r in results.items()}


class _Sink(threading.Thread):
    """One host's `docker load`, fed from a bounded queue (the save stream is read once for all hosts)."""

    def __init__(self, host: HostConfig, inv: Inventory):
        super().__init__(name=f"load-{host.name}", daemon=True)
        self.host, self.inv = host, inv
        self.chunks: queue.Queue = queue.Queue(maxsize=16)
        self.error = ""
        self.output = ""
        self.ready = threading.Event()
        self.conn = None

    def run(self) -> None:
        try:
            self.conn = connect(self.host, self.inv)
            chan = self.conn.client.get_transport().open_session()
            chan.exec_command(quote_cmd(["docker", "load"]))
            self.ready.set()
            while (chunk := self.chunks.get()) is not None:
                if not self.error:
                    chan.sendall(chunk)
            chan.shutdown_write()
            out = chan.makefile("rb").read().decode(errors="replace")
            err = chan.makefile_stderr("rb").read().decode(errors="replace")
            code = chan.recv_exit_status()
            self.output = out.strip()
            if code != 0:
                self.error = f"docker load exited {code}: {(err or out).strip()[-300:]}"
        except Exception as exc:  # lost connection, auth, ... : this host failed, the others go on
            self.error = self.error or f"{type(exc).__name__}: {exc}"
            self.ready.set()
            while self.chunks.get() is not None:  # keep draining so the reader never blocks on us
                pass
        finally:
            if self.conn is not None:
                self.conn.close()

    def feed(self, chunk: bytes | None) -> None:
        self.chunks.put(chunk)


def deliver_stream(client, inv: Inventory, hosts: list[HostConfig], ref: str,
                   progress: Progress = _quiet) -> dict[str, HostImage]:
    """`docker save REF | ssh host docker load` to every host that lacks this image ID, all at once."""
    want = image_id(client, ref)
    if want is None:
        raise ImageError(f"{ref} is not in the local engine: build it first (kit images build)")
    t0 = time.monotonic()
    have = _ids_or_none(inv, hosts, ref)
    results: dict[str, HostImage] = {}
    need = []
    for h in hosts:
        if have.get(h.name) == want:
            results[h.name] = HostImage(h.name, "skipped", want, time.monotonic() - t0)
            progress(h.name, f"already holds {ref} ({want[:19]}): skipped")
        else:
            need.append(h)
    if not need:
        return results
    sinks = [_Sink(h, inv) for h in need]
    for s in sinks:
        s.start()
    sent = 0
    size = client.images.get(ref).attrs.get("Size", 0)
    last = 0.0
    try:
        for chunk in client.images.get(ref).save(chunk_size=CHUNK, named=ref):
            for s in sinks:
                s.feed(chunk)
            sent += len(chunk)
            if time.monotonic() - last > 2:
                last = time.monotonic()
                progress("stream", f"{sent / 1e6:.0f} MB sent to {len(sinks)} host(s)"
                         + (f" (image {size / 1e6:.0f} MB unpacked)" if size else ""))
    finally:
        for s in sinks:
            s.feed(None)
        for s in sinks:
            s.join()
    after = _ids_or_none(inv, need, ref)
    for s in sinks:
        got = after.get(s.host.name)
        if s.error:
            results[s.host.name] = HostImage(s.host.name, "failed", got, time.monotonic() - t0, s.error)
        elif got != want:
            results[s.host.name] = HostImage(s.host.name, "failed", got, time.monotonic() - t0,
                                             f"after docker load the host has {got or 'no image'} under {ref}")
        else:
            results[s.host.name] = HostImage(s.host.name, "loaded", got, time.monotonic() - t0)
        progress(s.host.name, results[s.host.name].error or f"loaded {ref} ({sent / 1e6:.0f} MB)")
    return {h.name: results[h.name] for h in hosts}


def _ids_or_none(inv: Inventory, hosts: list[HostConfig], ref: str) -> dict[str, str | None]:
    """Like host_ids, but a host that cannot be asked counts as not holding the image (delivery retries it)."""
    return {n: (r.id if r.action != "failed" else None) for n, r in _inspect_all(inv, hosts, ref).items()}


def deliver_registry(inv: Inventory, hosts: list[HostConfig], ref: str, pull_ref: str, want: str,
                     progress: Progress = _quiet) -> dict[str, HostImage]:
    """Every host pulls pull_ref (the registry's copy) and tags it ref; hosts holding `want` are skipped."""

    def one(host: HostConfig) -> HostImage:
        t0 = time.monotonic()
        with connect(host, inv) as conn:
            if remote_image_id(conn, ref) == want:
                progress(host.name, f"already holds {ref}: skipped")
                return HostImage(host.name, "skipped", want, time.monotonic() - t0)
            for argv in (["docker", "pull", "--quiet", pull_ref], ["docker", "tag", pull_ref, ref]):
                res = conn.run(quote_cmd(argv), hide=True, warn=True, in_stream=False)
                if res.exited != 0:
                    raise ImageError(f"{' '.join(argv[:2])} failed (exit {res.exited}): {res.stderr.strip()[-300:]}")
            got = remote_image_id(conn, ref)
        if got != want:
            return HostImage(host.name, "failed", got, time.monotonic() - t0,
                             f"pulled {pull_ref} but it is {got}, not {want}")
        progress(host.name, f"pulled {pull_ref}")
        return HostImage(host.name, "pulled", got, time.monotonic() - t0)

    return _on_hosts(hosts, one)


def verify_hosts(inv: Inventory, hosts: list[HostConfig], ref: str, expected: str) -> dict[str, str]:
    """Every host holds `expected` under ref, or ImageMismatch naming each host that does not."""
    ids = host_ids(inv, hosts, ref)
    wrong = {n: i for n, i in ids.items() if i != expected}
    if wrong:
        raise ImageMismatch(ref, expected, wrong)
    return {n: i for n, i in ids.items() if i is not None}


# ---- record -----------------------------------------------------------------------------------


def record(run_dir: Path, ref: str, image: str, *, spec_key: str | None = None, pins_hash: str | None = None,
           repo_digest: str | None = None, hosts: dict[str, str] | None = None) -> Path:
    """runs/<id>/images.json: per image reference its ID, pins hash, registry digest and every host's ID."""
    path = Path(run_dir) / "images.json"
    data = json.loads(path.read_text()) if path.is_file() else {"schema_version": 1, "images": {}}
    entry = data["images"].setdefault(ref, {})
    entry.update({k: v for k, v in {"id": image, "image": spec_key, "pins_hash": pins_hash,
                                    "repo_digest": repo_digest}.items() if v is not None})
    if hosts is not None:
        entry.setdefault("hosts", {}).update(hosts)
    entry["recorded"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def labels_of(client, ref: str) -> dict[str, str]:
    return dict(client.images.get(ref).labels or {})


def pinned_images(client, suite, frameworks: list[str], explicit: str | None,
                  progress: Progress = _quiet) -> dict[str, tuple[str, ImageSpec | None]]:
    """framework -> (image reference, its spec): `explicit` for all, else each framework's pinned image of the
    suite's hardware/generation, built here when missing."""
    from kit.images.spec import load_pins

    if explicit:
        if image_id(client, explicit) is None:
            raise ImageError(f"{explicit}: not in the local engine")
        return {fw: (explicit, None) for fw in frameworks}
    pins = load_pins()
    out = {}
    for fw in frameworks:
        spec = pins.for_case(fw, suite.hardware, suite.name)
        out[fw] = (build(client, spec, progress).ref, spec)
    return out


def check_pins(pins: Pins, root: Path = REPO_ROOT) -> list[str]:
    """Drift of the Dockerfiles and of the cpu image's pins against requirements.lock."""
    problems = drift(pins, root)
    lock = root / "requirements.lock"
    if lock.is_file():
        for spec in pins.specs():
            if spec.name == "cpu":
                problems += lock_drift(spec, lock.read_text())
    return problems


def write_rendered(pins: Pins, root: Path = REPO_ROOT) -> list[Path]:
    """Write every Dockerfile from the pins; remove Dockerfiles no image renders. -> the files changed."""
    from kit.images.spec import render_all

    changed = []
    expected = render_all(pins)
    for rel, text in expected.items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    for path in sorted((root / "docker").rglob("Dockerfile*")):
        if path.relative_to(root) not in expected:
            path.unlink()
            changed.append(path)
    return changed


__all__ = ["Built", "HostImage", "ImageError", "ImageMismatch", "build", "build_context", "check_pins",
           "deliver_registry", "deliver_stream", "docker_client", "host_ids", "make_base", "push", "record",
           "verify_hosts", "wheelhouse", "write_rendered"]
