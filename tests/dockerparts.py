"""Real Docker parts for tests and bench scripts: this machine's engine, a local registry, the cpu image.

    client = ensure_engine()                 # the engine on /var/run/docker.sock; started (as root) if absent
    with Registry(tmp) as reg: reg.address   # docker-registry (Debian) on 0.0.0.0:<free port>
    built = cpu_image(client)                # kit/debian base (debootstrap) + the pinned cpu image, cached by tag
    root = seeded_data_root(built)           # a data-root holding it, for test hosts' engines (NetHosts seed=)

No pytest in here: bench scripts use it too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from kit.run.runner import stop_tree

DOCKERD_ARGS = ["--iptables=false", "--bridge=none"]  # what works on these machines (no NAT, no docker0)


@contextlib.contextmanager
def one_at_a_time(what: str):
    """A machine-wide lock: parallel test workers start one dockerd and build the cpu image once."""
    with open(f"/tmp/kit-tests-{what}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_engine(timeout_s: float = 60.0):
    """A docker SDK client of a running engine; as root, starts `dockerd --iptables=false --bridge=none`."""
    with one_at_a_time("dockerd"):
        return _ensure_engine(timeout_s)


def _ensure_engine(timeout_s: float):
    import docker

    try:
        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # not running (yet)
        first = exc
    if os.geteuid() != 0:
        raise RuntimeError(f"no Docker engine ({first}) and not root, so none can be started here")
    dockerd = shutil.which("dockerd") or shutil.which("dockerd", path="/usr/sbin:/usr/local/sbin")
    if dockerd is None:
        raise RuntimeError("no Docker engine and no dockerd (Debian package docker.io)")
    log = open("/var/log/kit-test-dockerd.log", "ab")
    try:
        subprocess.Popen([dockerd, *DOCKERD_ARGS], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
    finally:
        log.close()
    end = time.monotonic() + timeout_s
    while True:
        try:
            client = docker.from_env()
            client.ping()
            return client
        except Exception as exc:
            if time.monotonic() > end:
                raise RuntimeError(f"dockerd did not come up in {timeout_s:.0f}s ({exc}); "
                                   "see /var/log/kit-test-dockerd.log") from None
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """Debian's docker-registry serving a directory, on every address of this machine (the test hosts
    reach it through their bridge), port picked free. Docker treats 127.0.0.1:<port> as insecure-allowed."""

    def __init__(self, workdir: Path, port: int | None = None):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Registry:
        binary = shutil.which("docker-registry")
        if binary is None:
            raise RuntimeError("docker-registry not found (Debian package docker-registry)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(
            "version: 0.1\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.workdir / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: 0.0.0.0:{self.port}\n"
            "log:\n  level: warn\n"
        )
        log = open(self.workdir / "registry.log", "ab")
        try:
            self.proc = subprocess.Popen([binary, "serve", str(config)], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, start_new_session=True)
        finally:
            log.close()
        end = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("docker-registry did not start: "
                                   + (self.workdir / "registry.log").read_text(errors="replace")[-2000:])
            time.sleep(0.1)

    def manifest_digest(self, repo: str, tag: str) -> str:
        """The registry's own Docker-Content-Digest for repo:tag."""
        req = urllib.request.Request(f"http://{self.address}/v2/{repo}/manifests/{tag}", method="HEAD", headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.headers["Docker-Content-Digest"]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._untag()

    def _untag(self) -> None:
        """Drop the engine's tags naming this registry (a push tags the image <address>/<ref>): else they pile up,
        one per test run, and keep every old build of the cpu image from being pruned."""
        import docker

        try:
            client = docker.from_env()
            for image in client.images.list():
                for tag in image.tags:
                    if tag.startswith(f"{self.address}/"):
                        client.images.remove(tag, noprune=True)
        except docker.errors.DockerException:  # no engine here: nothing was tagged
            pass

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def cpu_image(client, progress=None):
    """The pinned cpu image (built from the kit's debootstrap base when missing) -> kit.images.build.Built."""
    from kit.images import build as images
    from kit.images.spec import load_pins

    spec = load_pins().get("cpu")
    say = progress or (lambda who, line: None)
    with one_at_a_time("cpu-image"):
        images.make_base(client, spec, say)
        return images.build(client, spec, say)


SEEDS = Path("/var/cache/kit-tests/docker-data")


def seeded_data_root(image, timeout_s: float = 600.0) -> Path:
    """A Docker data-root holding IMAGE (a kit.images.build.Built) alone, its `image/` records and `overlay2/`
    layers: loaded once per machine by a dockerd of its own (kept by the image's ID, older seeds removed), so that a
    test host's engine starts from it (NetHosts.start_docker seed=) instead of a `docker load` of its own."""
    root = SEEDS / image.id.split(":")[-1][:12]
    with one_at_a_time("docker-seed"):
        if (root / "complete").is_file():
            return root
        if SEEDS.is_dir():
            for old in SEEDS.iterdir():
                shutil.rmtree(old, ignore_errors=True)
        work = SEEDS / "loading"
        run = Path("/run/kit-docker-seed")  # short: the engine's sockets must stay under 108 bytes
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        (run / "daemon.json").write_text("{}\n")
        sock = run / "docker.sock"
        with open(run / "dockerd.log", "ab") as log:
            dockerd = subprocess.Popen(
                [shutil.which("dockerd") or "dockerd", "--config-file", str(run / "daemon.json"), "--data-root",
                 str(work), "--exec-root", str(run / "exec"), "--pidfile", str(run / "docker.pid"), "--host",
                 f"unix://{sock}", "--iptables=false", "--ip6tables=false", "--bridge=none"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            end = time.monotonic() + 60
            while subprocess.run(["docker", "-H", f"unix://{sock}", "version"], capture_output=True).returncode:
                if dockerd.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("the seed dockerd did not come up: "
                                       + (run / "dockerd.log").read_text(errors="replace")[-2000:])
                time.sleep(0.2)
            with subprocess.Popen(["docker", "save", image.ref], stdout=subprocess.PIPE) as save:
                loaded = subprocess.run(["docker", "-H", f"unix://{sock}", "load"], stdin=save.stdout,
                                        capture_output=True, text=True, timeout=timeout_s)
            if save.returncode or loaded.returncode:
                raise RuntimeError(f"loading {image.ref} into the seed failed: {loaded.stderr.strip()[-2000:]}")
        finally:
            stop_tree(dockerd, grace=30)
        root.mkdir(parents=True)
        for part in ("image", "overlay2"):
            (work / part).rename(root / part)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
        (root / "complete").write_text(f"{image.ref} {image.id}\n")
        return root
