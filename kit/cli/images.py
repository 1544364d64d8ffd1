"""`kit images ...`: render / base / build / push / deliver / verify (what `make images` and the Fabric tasks call)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.config import settings

EXIT_OK, EXIT_MISMATCH = 0, 1


def add_parser(sub) -> None:
    p = sub.add_parser("images", help="pinned images: render Dockerfiles, build, push, deliver to hosts, verify")
    isub = p.add_subparsers(dest="images_command", required=True, metavar="ACTION")

    r = isub.add_parser("render", help="write docker/**/Dockerfile from docker/pins.yaml")
    r.add_argument("--check", action="store_true", help="write nothing; exit 1 if any Dockerfile differs (drift)")
    _pins(r)

    b = isub.add_parser("base", help="make the cpu image's base (debootstrap minbase + docker import)")
    b.add_argument("--mirror", default=None, help="Debian mirror (default http://deb.debian.org/debian)")
    b.add_argument("--force", action="store_true", help="make it again even if the engine has it")
    _pins(b)

    b = isub.add_parser("build", help="build images (default: cpu); the build fails if a pin does not hold")
    b.add_argument("image", nargs="*", default=["cpu"], help="cpu, paddle/v100, pytorch/a100, paddle/seed002, ...")
    _pins(b)

    for name, text in (("push", "push to a registry; with --hosts every host pulls it"),
                       ("deliver", "put the image on every host (registry pull, else docker save | ssh docker load)"),
                       ("verify", "check that every host holds the very same image ID")):
        d = isub.add_parser(name, help=text)
        d.add_argument("image", help="image name (cpu, paddle/v100, ...) or a reference (kit/cpu:<tag>)")
        d.add_argument("--hosts", required=name != "push", help="comma-separated host names from the inventory")
        d.add_argument("--hosts-file", type=Path, default=None,
                       help="inventory (default: $KIT_HOSTS_FILE or hosts.yaml)")
        if name != "verify":
            d.add_argument("--registry", required=name == "push", help="registry host:port (e.g. 127.0.0.1:5000)")
            d.add_argument("--pull-registry", help="the registry's address as the hosts reach it (default --registry)")
        d.add_argument("--run-dir", type=Path, help="record IDs and digests in <run-dir>/images.json")
        _pins(d)


def _pins(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pins", type=Path, default=None, help="pin table (default docker/pins.yaml)")


def _say(who: str, line: str) -> None:
    print(f"[{who}] {line}", file=sys.stderr, flush=True)


def cmd_images(args: argparse.Namespace) -> int:
    from kit.images import build, deliver
    from kit.images.spec import PINS_FILE, load_pins

    pins = load_pins(args.pins or PINS_FILE)
    action = args.images_command
    if action == "render":
        if args.check:
            problems = build.check_pins(pins)
            for line in problems:
                print(f"kit images render --check: {line}", file=sys.stderr)
            if not problems:
                print(f"docker/: {len(pins.specs())} Dockerfiles match {pins.path}")
            return EXIT_MISMATCH if problems else EXIT_OK
        for path in build.write_rendered(pins):
            print(path)
        return EXIT_OK
    client = build.docker_client()
    if action == "base":
        spec = pins.get("cpu")
        kwargs = {"mirror": args.mirror} if args.mirror else {}
        print(build.make_base(client, spec, _say, force=args.force, **kwargs))
        return EXIT_OK
    if action == "build":
        for key in args.image:
            built = build.build(client, _spec(pins, key), _say)
            print(f"{built.ref} {built.id}{' (already built)' if built.cached else ''}")
        return EXIT_OK
    ref, image_id, spec = _resolve(client, pins, args.image)
    inv, hosts = _hosts(args) if args.hosts else (None, [])
    repo_digest = None
    if action == "push":
        pushed, repo_digest = build.push(client, ref, args.registry, _say)
        print(f"{pushed}@{repo_digest}")
    if action in ("push", "deliver") and hosts:
        if getattr(args, "registry", None):
            if action == "deliver":
                _pushed, repo_digest = build.push(client, ref, args.registry, _say)
            pull = f"{args.pull_registry or args.registry}/{ref}"
            results = deliver.deliver_registry(inv, hosts, ref, pull, image_id, _say)
        else:
            results = deliver.deliver_stream(client, inv, hosts, ref, _say)
        for r in results.values():
            print(f"{r.host}: {r.action} in {r.seconds:.1f} s{(': ' + r.error) if r.error else ''}")
        if any(r.action == "failed" for r in results.values()):
            return EXIT_MISMATCH
    host_ids = deliver.verify_hosts(inv, hosts, ref, image_id) if hosts else None
    if host_ids is not None:
        print(f"{ref}: {image_id} on every host ({', '.join(host_ids)})")
    if args.run_dir:
        print(deliver.record(args.run_dir, ref, image_id, spec_key=spec.key if spec else None,
                            pins_hash=spec.pins_hash() if spec else None, repo_digest=repo_digest, hosts=host_ids))
    return EXIT_OK


def _spec(pins, key: str):
    try:
        return pins.get(key)
    except KeyError as exc:
        from kit.images.build import ImageError

        raise ImageError(str(exc.args[0])) from None


def _resolve(client, pins, name: str):
    """An image name -> (its built reference, ID, spec), building it if needed; a reference is taken as is."""
    from kit.images import build

    if ":" in name:
        image_id = build.image_id(client, name)
        if image_id is None:
            raise build.ImageError(f"{name}: not in the local engine")
        return name, image_id, None
    spec = _spec(pins, name)
    built = build.build(client, spec, _say)
    return built.ref, built.id, spec


def _hosts(args):
    from kit.config.hosts import load_hosts

    inv = load_hosts(settings.hosts_file(args.hosts_file))
    return inv, [inv.get(n.strip()) for n in args.hosts.split(",") if n.strip()]


def images_for_bench(run_dir: Path, suite, runs, explicit: str | None, console) -> dict[str, str]:
    """framework -> image reference for `kit bench --runtime docker` (built when missing), recorded in
    <run_dir>/images.json with the local engine's image IDs."""
    from kit.images import build, deliver

    client = build.docker_client()
    say = lambda who, line: console.print(f"[{who}] {line}", markup=False, highlight=False)  # noqa: E731
    pinned = build.pinned_images(client, suite, sorted({r.case.framework for r in runs}), explicit, say,
                                  cases=[r.case for r in runs])
    for ref, spec in pinned.values():
        image_id = build.image_id(client, ref)
        deliver.record(run_dir, ref, image_id, spec_key=spec.key if spec else None,
                      pins_hash=spec.pins_hash() if spec else None, hosts={"localhost": image_id})
    return {fw: ref for fw, (ref, _spec) in pinned.items()}
