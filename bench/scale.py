"""`make bench-scale`: `kit report`, `kit bundle` and `kit verify` on a generated 16n8g run of the whole v100 suite.

The run directory is generated, not run: every case of kit/suites/v100.yaml with its repeats, the multi-node
cases on N hosts x 8 GPUs (N = 4, 8, 16: the quarter, half and full sizes), laid out as `kit cluster` leaves it
(kit.run.ssh / kit.run.gather):

    runs/<id>/suite.yaml, run.json, env/<host>/ (probes.json, raw outputs, capture.json), report.md, results.*
    runs/<id>/hosts/<host>/<run folder>/stdout.log, launcher/workerlog.N, <log stem>.cmd.json   every host's files
    runs/<id>/logs/<DLPerf path>.log (+ .cmd.json)                                               rank 0's

Log text is replayed from real logs: the published PaddleClas, NGC PyTorch/TensorFlow/MXNet logs in
../shared/fixtures/published-logs, FleetX's and PLSC's print statements as the stand-ins print them, and the
kit harness's own :::KITLOG lines (the launcher and warning lines around them copied from a real run). A
published program's command record is built by the kit's own recipe (kit.config.reference.record), so `kit verify`
judges it as a real one. report.md and results.json are written by the kit (kit.run.bench.write_report), as a run
writes them. The multi-node cases' published references (4 nodes) are dropped: they do not apply to N nodes.

Each command runs as its own subprocess; wall time and peak RSS of its process tree (psutil, polled every 20 ms)
are the median of --repeat runs. Goals (issue 21): report <= 10 s, bundle and verify <= 60 s each, peak
<= 1 GB, and cost growing linearly with the number of logs. Exit 0 when every goal is met, else 1.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "scripts" / "harness"))

from kit.config import reference  # noqa: E402
from kit.config.cases import Case  # noqa: E402
from kit.config.suites import load_suite  # noqa: E402
from kit.core.catalogue import load  # noqa: E402
from kit.core.layout import run_folder, sidecar_name  # noqa: E402
from kit.core.secrets import redact  # noqa: E402
from kit.hosts import capture as ec  # noqa: E402
from kit.images.spec import pin_of  # noqa: E402
from kit.run import bench, records  # noqa: E402
from kit.run.ssh import wrapper_command  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_logs import (  # noqa: E402  (the log text)
    LAUNCH_END,
    as_its_case,
    harness_other,
    harness_rank0,
    launch_header,
    reference_text,
    tf_ranks,
)

SUITE = REPO / "kit" / "suites" / "v100.yaml"
TOPO = REPO.parent / "shared" / "fixtures" / "nvidia-smi" / "topo-m_8xV100-SXM2_mlx5.txt"
SMI = REPO / "tests" / "fixtures" / "nvidia-smi" / "tesla-t4.xml"
KIT = str(REPO / ".venv" / "bin" / "kit")
WORK = "/home/bench/kit-work"
DATA = "/data"
PORT = 29500
NIC = "eth0"
GOALS = {"report": 10.0, "bundle": 60.0, "verify": 60.0}
PEAK_MB = 1024.0
LINEAR_SLACK = 1.25  # cost ratio <= 1.25 x the logs ratio counts as linear

# ------------------------------------------------------------------------------------------------ the run


def generated_suite(nodes: int, repeats: int | None, trim: bool, entries: int | None = None) -> dict:
    """v100.yaml with every multi-node case on `nodes` hosts (their 4-node references dropped); trim: each entry's
    lists cut to one value (its frameworks kept, its largest GPU count), a tiny run for tests; entries: its first
    ENTRIES entries only."""
    data = yaml.safe_load(SUITE.read_text())
    data["cases"] = data["cases"][:entries]
    data["name"] = "v100-generated"  # not the built-in v100: other hosts, repeats and lists
    if repeats:
        data["defaults"]["repeats"] = repeats
    cases = []
    for entry in data["cases"]:
        entry = copy.deepcopy(entry)
        if repeats and "repeats" in entry:
            entry["repeats"] = repeats
        if trim:
            for key, value in list(entry.items()):
                if isinstance(value, list) and key not in ("framework", "references"):
                    entry[key] = value[-1] if key == "gpus_per_node" else value[0]

            def selects(ref: dict, entry: dict = entry) -> bool:
                return all(v == entry[k] or (isinstance(entry[k], list) and v in entry[k])
                           for k, v in ref.items() if k in entry and k != "references")
            if entry.get("references"):
                entry["references"] = [r for r in entry["references"] if selects(r)] or None
                if entry["references"] is None:
                    del entry["references"]
        if entry.get("nodes", 1) != 1:
            entry["nodes"] = nodes
            entry.pop("references", None)
        elif entry.get("references"):
            entry["references"] = [r for r in entry["references"] if r.get("nodes", 1) == 1]
        cases.append(entry)
    data["cases"] = cases
    return data


def env_captures(run_dir: Path, hosts: list[str]) -> None:
    """Each host's raw probe outputs (a real V100 `topo -m`, a real `nvidia-smi -q -x`, this machine's /proc files)
    and the capture the kit parses from them."""
    raw = {"cpuinfo": Path("/proc/cpuinfo").read_text(), "meminfo": Path("/proc/meminfo").read_text(),
           "os-release": Path("/etc/os-release").read_text(), "kernel": subprocess.run(
               ["uname", "-r"], capture_output=True, text=True).stdout, "docker": "\n", "infiniband": "mlx5_0\n",
           "nvidia-smi-topo": TOPO.read_text(), "nvidia-smi-q": SMI.read_text()}
    commands = {"has-nvidia-smi": "command -v nvidia-smi", "nvidia-smi-topo": "nvidia-smi topo -m",
                "nvidia-smi-q": "nvidia-smi -q -x", "cpuinfo": "cat /proc/cpuinfo", "meminfo": "cat /proc/meminfo",
                "os-release": "cat /etc/os-release", "kernel": "uname -r",
                "docker": "docker version --format '{{.Server.Version}}'", "infiniband": "ls /sys/class/infiniband",
                "nic": f"cat /sys/class/net/{NIC}/operstate"}
    for host in hosts:
        d = run_dir / "env" / host
        d.mkdir(parents=True)
        probes = {}
        for name, cmd in commands.items():
            code = 1 if name == "docker" else 0
            probes[name] = {"command": cmd, "exit": code}
            if name in raw:
                (d / f"{name}.txt").write_text(raw[name])
        probes["nic"]["interface"] = NIC
        (d / "probes.json").write_text(json.dumps(probes, indent=2) + "\n")
        capture = ec.capture_from_dir(host, d)
        (d / "capture.json").write_text(json.dumps(capture.to_dict(), indent=2) + "\n")
    (run_dir / "env" / "verdict.json").write_text(json.dumps({"ok": True, "problems": [], "busy": {}}) + "\n")


class Writer:
    def __init__(self, run_dir: Path):
        self.run_dir, self.files, self.bytes = run_dir, 0, 0
        self.rank_logs = 0

    def put(self, rel: Path | str, text: str, rank_log: bool = False) -> None:
        path = self.run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        path.write_bytes(data)
        self.files += 1
        self.bytes += len(data)
        self.rank_logs += rank_log


def harness_run(w: Writer, case: Case, repeat: int, hosts: list[str], ips: list[str]) -> dict:
    folder = run_folder(case.log_path(repeat))
    g, ranks = case.gpus_per_node, case.processes
    rank0 = harness_rank0(case, repeat, hosts[0])
    entry_hosts = {}
    for n in range(case.nodes):
        host = hosts[n]
        base = Path("hosts") / host / folder
        work = f"{WORK}/runs/{w.run_dir.name}/{host}/{folder.as_posix()}"
        script = [f"{WORK}/harness/2f39407c2333/train.py", "--framework", case.framework, "--model", case.model,
                  "--batch-size", str(case.batch_size), "--precision", case.precision, "--warmup-steps",
                  str(case.warmup_steps), "--measure-steps", str(case.measure_steps), "--data", case.data]
        if ranks == 1:
            argv, stdout = ["/opt/kit/venv/bin/python", *script], rank0
        elif case.framework == "paddle":
            argv = ["/opt/kit/venv/bin/python", "-m", "paddle.distributed.launch", "--nnodes", str(case.nodes),
                    "--nproc_per_node", str(g), "--rank", str(n), "--master", f"{ips[0]}:{PORT}", "--host", ips[n],
                    "--log_dir", f"{work}/launcher", *script]
            head = launch_header(case.nodes, g, n, ips[n], f"{ips[0]}:{PORT}", f"{work}/launcher", script[0])
            for local in range(g):
                rank = n * g + local
                text = rank0 if rank == 0 else harness_other("paddle", rank, ranks, local, host, case.measure_steps)
                w.put(base / "launcher" / f"workerlog.{local}", text, rank_log=True)
                w.put(base / "launcher" / f"envlog.{local}", f"PADDLE_TRAINER_ID={rank}\nPADDLE_LOCAL_RANK={local}\n"
                      f"PADDLE_TRAINERS_NUM={ranks}\nPADDLE_MASTER={ips[0]}:{PORT}\n")
            own = rank0 if n == 0 else harness_other("paddle", n * g, ranks, 0, host, case.measure_steps)
            stdout = head + own + LAUNCH_END
        else:
            argv = ["/opt/kit/venv/bin/python", "-m", "torch.distributed.run", "--nnodes", str(case.nodes),
                    "--node_rank", str(n), "--nproc_per_node", str(g), "--master_addr", ips[0], "--master_port",
                    str(PORT), *script]
            parts = [rank0 if n == 0 and local == 0 else
                     harness_other("torch", n * g + local, ranks, local, host, case.measure_steps)
                     for local in range(g)]
            stdout = "".join(parts)
        w.put(base / "stdout.log", stdout, rank_log=ranks == 1 or case.framework == "torch")
        w.put(base / "pgid", f"{4000 + n}\n")
        line = wrapper_command(work, {"PYTHONUNBUFFERED": "1", "NCCL_SOCKET_IFNAME": NIC}, argv)
        entry_hosts[host] = {"exit_code": 0, "error": "", "seconds": 180.5, "command": line}
    w.put(Path("logs") / case.log_path(repeat), (w.run_dir / "hosts" / hosts[0] / folder / "stdout.log").read_text())
    return entry_hosts


def clean_at(pin: str) -> dict:
    """What scripts/reference/launch.py records of a checkout clean at its pin (v4's program_code_pinned@2)."""
    return load("code_state", "reference").judge({"head": (0, pin), "status": (0, ""), "flags": (0, "")})


def reference_run(w: Writer, case: Case, repeat: int, hosts: list[str], ips: list[str], pin: str) -> dict:
    folder = run_folder(case.log_path(repeat))
    job = case.ref_job()
    g, ranks = case.gpus_per_node, case.processes
    text = f"# bench/scale.py: {case.key} run {repeat}\n" + as_its_case(reference_text(case), case)  # its own
    entry_hosts = {}
    log_rel = Path("logs") / case.log_path(repeat)
    for n in range(case.nodes):
        host = hosts[n]
        cluster = reference.Cluster(n, tuple(ips[:case.nodes]), PORT, NIC)
        cmd = reference.build(job, cluster, code_root="/opt/models", data_dir=reference.data_path(DATA, job))
        if not cmd.argv:  # rank 0's mpirun starts this host's ranks
            continue
        base = Path("hosts") / host / folder
        work = f"{WORK}/runs/{w.run_dir.name}/{host}/{folder.as_posix()}"
        meta = reference.record(cmd, job, cluster)
        meta.update({"started": "2026-11-24T08:15:20+00:00", "host": host, "ran_in": cmd.cwd,
                     "model_code_commit": pin, "model_code_state": clean_at(pin), "patch_sha256": None,
                     "environ": {"HOME": "/root", "PATH": "/usr/local/bin:/usr/bin:/bin", "PWD": work,
                                 "PYTHONUNBUFFERED": "1", **redact(cmd.env)}})
        launch = "paddle.distributed.launch" in cmd.argv
        if "-tag-output" in cmd.argv:
            stdout = tf_ranks(text, ranks)
        elif launch:
            for local in range(g):
                w.put(base / "launcher" / f"workerlog.{local}", text, rank_log=True)
            stdout = launch_header(case.nodes, g, n, ips[n], f"{ips[0]}:{PORT}", f"{work}/launcher",
                                   cmd.argv[-1]) + text + LAUNCH_END
        else:
            stdout = text
        w.put(base / "stdout.log", stdout, rank_log=not launch)
        w.put(base / "pgid", f"{4000 + n}\n")
        w.put(base / sidecar_name(log_rel.name), json.dumps(meta, indent=2, sort_keys=True) + "\n")
        line = wrapper_command(work, {"PYTHONUNBUFFERED": "1"}, ["python3", "kit-scripts/launch.py", "--record",
                               sidecar_name(log_rel.name), "--", *cmd.argv])
        entry_hosts[host] = {"exit_code": 0, "error": "", "seconds": 240.2, "command": line}
        if n == 0:
            w.put(log_rel, stdout)
            w.put(log_rel.with_name(sidecar_name(log_rel.name)), json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return entry_hosts


def generate(root: Path, nodes: int = 16, repeats: int | None = None, trim: bool = False,
             entries: int | None = None) -> tuple[Path, dict]:
    """A run directory of the v100 suite under root/runs/, multi-node cases on `nodes` hosts -> (run_dir, counts)."""
    run_dir = root / "runs" / f"v100-scale-{nodes}n"
    run_dir.mkdir(parents=True)
    (run_dir / "suite.yaml").write_text(yaml.safe_dump(generated_suite(nodes, repeats, trim, entries),
                                                       sort_keys=False))
    suite = load_suite(run_dir / "suite.yaml")
    width = max(nodes, 1)
    hosts = [f"h{i + 1:02d}" for i in range(width)]
    ips = [f"10.0.0.{i + 1}" for i in range(width)]
    env_captures(run_dir, hosts)
    meta = records.open_run_meta(run_dir, suite, hosts=hosts, host=records.host_description())
    meta["started"] = "2026-11-24T08:15:20+00:00"  # the generated logs' clock (kitlog_run's t0) starts here
    meta.pop("gpu_telemetry", None)  # a generated run has no GPU samples: it says it was not sampled
    w = Writer(run_dir)
    for case in suite.cases:
        pin = pin_of(reference.implementation(case.framework, case.model).code) if case.impl == "reference" else ""
        for repeat in range(1, case.repeats + 1):
            if case.impl == "harness":
                per_host = harness_run(w, case, repeat, hosts, ips)
            else:
                per_host = reference_run(w, case, repeat, hosts, ips, pin)
            log = run_dir / "logs" / case.log_path(repeat)
            value = records.figure_of(log, run_dir / "logs")
            meta["runs"][f"logs/{case.log_path(repeat).as_posix()}"] = {
                "case": case.key, "repeat": repeat, "status": "ok", "figure": value,
                "wall_seconds": 245.0, "reason": "", "hosts": per_host}
    records.finish_run_meta(run_dir, meta)
    bench.write_report(run_dir, suite)
    size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    nfiles = sum(1 for p in run_dir.rglob("*") if p.is_file())
    logs = sum(1 for p in run_dir.rglob("*") if p.is_file() and (p.suffix == ".log" or "workerlog." in p.name))
    return run_dir, {"runs": len(meta["runs"]), "rank_logs": w.rank_logs, "logs": logs, "files": nfiles,
                     "bytes": size}


# ------------------------------------------------------------------------------------------------ measuring


def measure(argv: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MB of the process tree, exit status, output tail) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    top = psutil.Process(proc.pid)
    peak = 0
    chunks: list[bytes] = []
    import threading

    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    while proc.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
            rss = 0
            for p in tree:
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    reader.join()
    out = b"".join(chunks).decode(errors="replace")
    return seconds, peak / 2**20, proc.returncode, out


def steps(run_dir: Path, work: Path) -> list[tuple[str, list[str]]]:
    bundle = work / f"{run_dir.name}.bundle.tar.gz"
    return [("report", [KIT, "report", str(run_dir), "--out", str(work / "report")]),
            ("bundle", [KIT, "bundle", str(run_dir), "--out", str(bundle), "--force", "--submitter", "bench",
                        "--system-name", "v100-16n8g"]),
            ("verify", [KIT, "verify", str(bundle)])]


def run_size(label: str, nodes: int, repeat: int, keep: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"kit-scale-{nodes}n-", dir=keep))
    try:
        t0 = time.perf_counter()
        run_dir, counts = generate(tmp, nodes)
        counts["generate_s"] = time.perf_counter() - t0
        out = {"label": label, "nodes": nodes, **counts}
        for name, argv in steps(run_dir, tmp):
            times, peaks = [], []
            for _ in range(repeat):
                seconds, peak, code, tail = measure(argv, tmp)
                if name != "report" and code == 1:  # ran to the end; some rule does not hold: the verdict says which
                    rules = collections.Counter(re.findall(r"^  \[(\w+)\]", tail, re.M))
                    out[f"{name}_verdict"] = "NOT OK: " + ", ".join(f"{k} x{v}" for k, v in sorted(rules.items()))
                elif code != 0:
                    out[f"{name}_error"] = f"exit {code}: {tail[-1500:]}"
                else:
                    out[f"{name}_verdict"] = next((ln for ln in tail.splitlines() if ln.startswith(("OK", "CONS"))),
                                                  "ok")
                times.append(seconds)
                peaks.append(peak)
            out[name] = {"seconds": statistics.median(times), "peak_mb": statistics.median(peaks),
                         "all_seconds": times}
        return out
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def table(results: list[dict]) -> list[str]:
    head = f"{'size':<8}{'nodes':>6}{'runs':>6}{'logs':>7}{'files':>7}{'MB':>8}"
    for name in GOALS:
        head += f"{name + ' s':>11}{'peak MB':>9}"
    lines = [head]
    for r in results:
        line = f"{r['label']:<8}{r['nodes']:>6}{r['runs']:>6}{r['logs']:>7}{r['files']:>7}{r['bytes'] / 1e6:>8.1f}"
        for name in GOALS:
            line += f"{r[name]['seconds']:>11.2f}{r[name]['peak_mb']:>9.0f}"
        lines.append(line)
    return lines


def ratios(big: dict, small: dict) -> dict:
    out = {"logs": big["logs"] / small["logs"], "bytes": big["bytes"] / small["bytes"]}
    for name in GOALS:
        out[name] = big[name]["seconds"] / small[name]["seconds"]
        out[name + "_peak"] = big[name]["peak_mb"] / small[name]["peak_mb"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="4,8,16", help="hosts of the multi-node cases at each size (default 4,8,16)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command per size; the median is shown")
    p.add_argument("--keep", type=Path, help="generate under this folder and keep it (default: a temporary one)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    labels = {0: "quarter", 1: "half", 2: "full"} if len(sizes) == 3 else {}
    results = []
    for i, nodes in enumerate(sizes):
        r = run_size(labels.get(i, f"{nodes}n"), nodes, args.repeat, args.keep)
        results.append(r)
        print(f"# {r['label']}: {r['runs']} runs, {r['logs']} logs, {r['bytes'] / 1e6:.1f} MB generated in "
              f"{r['generate_s']:.1f} s; " + ", ".join(f"{n} {r[n]['all_seconds']}" for n in GOALS), flush=True)
        for name in GOALS:
            if f"{name}_error" in r:
                print(f"#   {name} FAILED: {r[name + '_error']}", flush=True)
            elif f"{name}_verdict" in r and name != "report":
                print(f"#   {name}: {r[name + '_verdict'][:600]}", flush=True)
    print()
    print("\n".join(table(results)))
    ok = True
    full = results[-1]
    print()
    for name, limit in GOALS.items():
        good = full[name]["seconds"] <= limit and f"{name}_error" not in full
        ok &= good
        print(f"goal {name} <= {limit:g} s at full size: {full[name]['seconds']:.2f} s "
              f"{'MET' if good else 'MISSED'}" + (" (command failed)" if f"{name}_error" in full else ""))
    peak = max(r[n]["peak_mb"] for r in results for n in GOALS)
    ok &= peak <= PEAK_MB
    print(f"goal peak memory <= {PEAK_MB:g} MB: {peak:.0f} MB {'MET' if peak <= PEAK_MB else 'MISSED'}")
    linear = True
    for a, b in zip(results[1:], results[:-1], strict=False):
        rt = ratios(a, b)
        print(f"growth {a['label']}/{b['label']}: logs x{rt['logs']:.2f}, bytes x{rt['bytes']:.2f}, "
              + ", ".join(f"{n} time x{rt[n]:.2f} peak x{rt[n + '_peak']:.2f}" for n in GOALS))
        for name in GOALS:
            linear &= rt[name] <= LINEAR_SLACK * rt["logs"] and rt[name + "_peak"] <= LINEAR_SLACK * rt["logs"]
    ok &= linear
    print(f"goal linear growth (time and peak ratio <= {LINEAR_SLACK} x logs ratio): {'MET' if linear else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print("bench-scale: all goals met" if ok else "bench-scale: goal(s) missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
