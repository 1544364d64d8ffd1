"""`kit check-env`: capture every host's GPUs/topology/CPU/OS at once and compare them."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK, add_hosts_file, inventory


def add_parser(sub) -> None:
    p = sub.add_parser("check-env", help="capture every host's GPUs/topology/CPU/OS at once and compare them")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--hosts", help="comma-separated host names from the inventory")
    which.add_argument("--local", action="store_true", help="this machine, with no SSH (what `kit bench` captures)")
    add_hosts_file(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--require-gpu", action="store_true", help="a host without GPUs is a problem")
    p.add_argument("--allow-busy", action="store_true", help="do not refuse GPUs that run other processes")
    p.add_argument("--suite", help="also say whether the images of the suite's frameworks share a cuDNN minor version")
    p.add_argument("--yardstick", action="store_true",
                   help="with --local: also kit yardstick on this host (GEMM, memory, host link against the "
                        "datasheet and earlier runs; kept under RUNS_DIR/yardstick/); a suspect device is a problem")


def cmd_check_env(args: argparse.Namespace) -> int:
    from kit.hosts import probe as envprobe
    from kit.run import multinode

    run_dir = args.runs_dir / f"check-env-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if args.yardstick and not args.local:
        from kit.cli.common import UsageError
        raise UsageError("check-env: --yardstick measures this host: give --local (on each other host: kit yardstick)")
    if args.local:
        verdict, hosts = _local(run_dir, args.require_gpu), ["local"]
    else:
        inv, hosts = inventory(args)
        multinode.preflight(inv, hosts)
        verdict = envprobe.check_env(inv, hosts, run_dir / "env", require_gpu=args.require_gpu)
    for line in verdict.lines():
        print(f"  {line}")
    if args.suite:
        from kit.config.suites import load_suite
        from kit.images.parity import cudnn_of, parity_warning

        versions = cudnn_of(load_suite(args.suite))
        pinned = ", ".join(f"{fw} {v or 'not pinned'} ({key})" for fw, (key, v) in versions.items()) or "no GPU images"
        print(f"  cuDNN: {parity_warning(versions) or 'the same minor version: ' + pinned}")
    suspect = _yardstick(args.runs_dir) if args.yardstick else False
    busy_only = not verdict.problems and verdict.busy and args.allow_busy
    print(f"check-env: {'consistent' if verdict.ok or busy_only else 'REFUSED'} "
          f"({len(hosts)} host(s)); captures in {run_dir / 'env'}")
    return EXIT_OK if (verdict.ok or busy_only) and not suspect else EXIT_MISMATCH


def _yardstick(runs_dir: Path) -> bool:
    """kit yardstick here, judged and kept as `kit yardstick` keeps it; True when the device is suspect."""
    from kit.cli.yardstick import measured

    _, answer, _ = measured(runs_dir)
    print(f"  yardstick: {answer.line}")
    return answer.verdict == "suspect"


def _local(run_dir: Path, require_gpu: bool):
    """This machine's probes under run_dir/env/<hostname>/, judged as a one-host fleet; its GPUs named."""
    import json
    import socket

    from kit.core.files import write_text
    from kit.hosts import probe as envprobe
    from kit.hosts.consistency import consistency

    name = socket.gethostname()
    capture = envprobe.probe_local(name, run_dir / "env" / name)
    verdict = consistency([capture], require_gpu=require_gpu)
    write_text(run_dir / "env" / "verdict.json", json.dumps(verdict.to_dict(), indent=2) + "\n")
    gpus = capture.smi.model_summary() if capture.smi else "no GPU"
    driver = f", driver {capture.smi.driver_version}, CUDA {capture.smi.cuda_version}" if capture.smi else ""
    topology = f", topology {capture.topology.topology_class()}" if capture.topology else ""
    print(f"  {name}: {gpus}{driver}{topology}")
    return verdict
