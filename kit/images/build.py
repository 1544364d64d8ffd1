"""Images made here: the base image, the build context, the wheels, the build, the registry push.

    make_base(client, spec)                       debootstrap + docker import (no registry needed)
    built = build(client, spec)                   context assembled here; streamed progress; tag by hash
    push(client, built.ref, "127.0.0.1:5000")     -> the registry's manifest digest
    pinned_images(client, suite, frameworks, ...) each framework's pinned image (or its cases' image:), built if missing
    check_pins(pins) / write_rendered(pins)       the Dockerfiles on disk against their rendering of the pins

Putting images on hosts is kit.images.deliver's job.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit import REPO_ROOT
from kit.config import settings
from kit.core.files import write_text
from kit.core.inputs import KitError
from kit.images.spec import ImageSpec, Pins, drift, image_tag, load_pins, lock_drift, render, render_all

CONTEXT_FILES = ("scripts/verify_pins.py",)
CONTEXT_DIRS = ("scripts/harness",)
CACHE_DIR = Path(settings.resolve().cache_dir)  # KIT_CACHE_DIR (kit.config.settings)
LOCAL_WHEELS = Path("/opt/wheels")  # a machine's own wheel folder (e.g. the CPU build of torch), when present
DEBIAN_MIRROR = "http://deb.debian.org/debian"
CHUNK = 1 << 20

Progress = Callable[[str, str], None]  # (who: "build" / host name, line)


class ImageError(KitError):
    """A build, push, delivery or verification that did not succeed; str() says where and why."""


@dataclass
class Built:
    ref: str
    id: str
    spec_key: str
    pins_hash: str
    context_digest: str
    seconds: float = 0.0
    cached: bool = False


def quiet(who: str, line: str) -> None:
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


def labels_of(client, ref: str) -> dict[str, str]:
    return dict(client.images.get(ref).labels or {})


# ---- base image -------------------------------------------------------------------------------


def make_base(client, spec: ImageSpec, progress: Progress = quiet, mirror: str = DEBIAN_MIRROR,
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
               progress: Progress = quiet) -> Path:
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
    write_text(out / ".complete", "\n".join(sorted(p.name for p in out.glob("*.whl"))) + "\n")
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


def _mode(src: Path | bytes) -> int:
    return 0o755 if isinstance(src, Path) and os.access(src, os.X_OK) else 0o644


def context_digest(spec: ImageSpec, root: Path = REPO_ROOT, wheels: Path | None = None) -> str:
    """The digest of what build_context would pack (names, modes, contents), read without writing the tar."""
    digest = hashlib.sha256()
    for name, src in _context_members(spec, root, wheels):
        file_hash = hashlib.sha256()
        if isinstance(src, bytes):
            file_hash.update(src)
        else:
            with open(src, "rb") as f:
                for block in iter(lambda: f.read(CHUNK), b""):
                    file_hash.update(block)
        digest.update(f"{name}\0{_mode(src):o}\0{file_hash.hexdigest()}\n".encode())
    return digest.hexdigest()


def build_context(spec: ImageSpec, out: Path, root: Path = REPO_ROOT, wheels: Path | None = None) -> str:
    """A deterministic tar (fixed owner and mtime) of exactly what the Dockerfile copies -> its digest."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, src in _context_members(spec, root, wheels):
            info = tarfile.TarInfo(name)
            info.mode = _mode(src)
            if isinstance(src, bytes):
                info.size = len(src)
                tar.addfile(info, io.BytesIO(src))
            else:
                info.size = src.stat().st_size
                with open(src, "rb") as f:
                    tar.addfile(info, f)
    return context_digest(spec, root, wheels)


def build(client, spec: ImageSpec, progress: Progress = quiet, root: Path = REPO_ROOT,
          cache: Path = CACHE_DIR, tag: str | None = None) -> Built:
    """Build one image from its rendered Dockerfile; the build fails if verify_pins.py finds a mismatch."""
    t0 = time.monotonic()
    wheels = wheelhouse(spec, cache=cache, progress=progress) if spec.name == "cpu" else None
    digest = context_digest(spec, root, wheels)
    ref = tag or image_tag(spec, digest)
    existing = image_id(client, ref)
    if existing:
        progress("build", f"{ref} is already built ({existing[:19]})")
        return Built(ref, existing, spec.key, spec.pins_hash(), digest, time.monotonic() - t0, True)
    with tempfile.TemporaryDirectory(prefix="kit-context-") as tmp:
        ctx = Path(tmp) / "context.tar"
        if build_context(spec, ctx, root, wheels) != digest:
            raise ImageError(f"building {spec.key}: the build context changed while it was packed; build again")
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
    return Built(ref, built_id, spec.key, spec.pins_hash(), digest, time.monotonic() - t0, False)


# ---- registry ---------------------------------------------------------------------------------


def push(client, ref: str, registry: str, progress: Progress = quiet) -> tuple[str, str]:
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


# ---- the images a suite runs in ---------------------------------------------------------------


def pinned_images(client, suite, frameworks: list[str], explicit: str | None,
                  progress: Progress = quiet, cases=None) -> dict[str, tuple[str, ImageSpec | None]]:
    """framework -> (image reference, its spec): `explicit` for all, else each framework's pinned image (the one
    its cases name with `image:`, else the suite's hardware/generation's), built here when missing. `cases`: those
    to run (default: the suite's)."""
    if explicit:
        if image_id(client, explicit) is None:
            raise ImageError(f"{explicit}: not in the local engine")
        return {fw: (explicit, None) for fw in frameworks}
    pins = load_pins()
    out = {}
    for fw, spec in images_by_framework(pins, suite, frameworks, cases).items():
        out[fw] = (build(client, spec, progress).ref, spec)
    return out


def images_by_framework(pins: Pins, suite, frameworks: list[str], cases=None) -> dict[str, ImageSpec]:
    """framework -> the pinned image its cases run in (Pins.for_case with each case's `image:`). One image per
    framework in one run: cases of a framework naming different images are an ImageError (run them apart)."""
    cases = [c for c in (suite.cases if cases is None else cases) if c.framework in frameworks]
    out: dict[str, ImageSpec] = {}
    for fw in frameworks:
        images = sorted({getattr(c, "image", None) or "" for c in cases if c.framework == fw}) or [""]
        try:
            specs = {pins.for_case(fw, suite.hardware, suite.name, image or None).key: image for image in images}
        except KeyError as exc:
            raise ImageError(str(exc.args[0])) from None
        if len(specs) > 1:
            raise ImageError(f"the {fw} cases of suite {suite.name} run in {len(specs)} images "
                             f"({', '.join(sorted(specs))}); one run takes one image per framework: run them apart")
        out[fw] = pins.get(next(iter(specs)))
    return out


# ---- the Dockerfiles on disk ------------------------------------------------------------------


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
    changed = []
    expected = render_all(pins)
    for rel, text in expected.items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text(path, text)
            changed.append(path)
    for path in sorted((root / "docker").rglob("Dockerfile*")):
        if path.relative_to(root) not in expected:
            path.unlink()
            changed.append(path)
    return changed
