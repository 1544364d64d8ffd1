"""Images on the hosts: delivery, verification, and the record of what ran where.

    deliver_stream(client, inv, hosts, ref)       docker save | ssh host docker load, every host at once
    deliver_registry(inv, hosts, ref, pull_ref)   docker pull on every host at once
    verify_hosts(inv, hosts, ref, built.id)       the same image ID on every host, or ImageMismatch
    record(run_dir, ...)                          runs/<id>/images.json: what ran where

Hosts holding the same image ID are skipped. Remote commands are built with quote_cmd only.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.config.inventory import HostConfig, Inventory
from kit.core.files import write_json
from kit.core.inputs import parse_json
from kit.hosts.connect import InventoryError, connect, quote_cmd
from kit.hosts.fanout import on_all
from kit.images.build import CHUNK, ImageError, Progress, image_id, quiet


class ImageMismatch(ImageError):
    def __init__(self, ref: str, expected: str, wrong: dict[str, str | None]):
        self.ref, self.expected, self.wrong = ref, expected, wrong
        parts = [f"{h}: {'missing' if i is None else i[:19]}" for h, i in wrong.items()]
        super().__init__(f"{ref}: not the same image on every host (expected {expected[:19]}): " + "; ".join(parts))


@dataclass
class HostImage:
    host: str
    action: str  # "skipped" (already there), "loaded", "pulled", "failed"
    id: str | None = None
    seconds: float = 0.0
    error: str = ""


# ---- asking hosts -----------------------------------------------------------------------------


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
    out = {}
    for name, result in on_all(hosts, fn).items():
        try:
            out[name] = result.get()
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


# ---- delivery --------------------------------------------------------------------------------


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
                   progress: Progress = quiet) -> dict[str, HostImage]:
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
                     progress: Progress = quiet) -> dict[str, HostImage]:
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
    data = parse_json(path.read_bytes()) if path.is_file() else {"images": {}}
    entry = data["images"].setdefault(ref, {})
    entry.update({k: v for k, v in {"id": image, "image": spec_key, "pins_hash": pins_hash,
                                    "repo_digest": repo_digest}.items() if v is not None})
    if hosts is not None:
        entry.setdefault("hosts", {}).update(hosts)
    entry["recorded"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return write_json(path, data, "images.json", sort_keys=True)
