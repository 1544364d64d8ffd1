"""The fleet table of a sweep (kit sweep): per row per case its figure, its ratio to the fleet's median, whether it
differs from the fleet beyond noise, and for each row that does the evidence in which it differs from its peers.
A row is a host, or one GPU of a host ('h1/gpu3') where the sweep ran its 1-GPU cases once per GPU (kit.run.sweep).

    fleet = fleet_of(run_dir)          # from sweep.json, each row's run.json and the captures (kit.core.rundir)
    fleet["verdict"]                   # '2 of 3 hosts within noise of the fleet's median (±1.2%); h3 -61%: ...'
    fleet_markdown(fleet)              # report.md's section

A row's runs of a case are held against the runs of the row whose figure is the fleet's median by THE noise rule
(kit.results.stats.ratio_check, as kit compare's): it differs when the ratio's interval excludes 1, however widely
either side's runs spread (the interval holds the spread; a spread beyond the rule's CV only keeps an interval that
reaches 1 from deciding, as kit reproduce's verdicts: a host held to a quarter core, its runs spread 11%, its
interval [0.27, 0.77], differs). Evidence: each field of the row's capture and run records (EVIDENCE) whose value
is none of its peers' (the rows that do not differ); a figure, more than HOSTS_APART outside their range. A GPU's
row reads its own GPU's fields of its host's capture (clocks, power limit, PCIe link, NUMA node) and its own runs'
telemetry (the sampler watched its GPU alone); its host's fields (CPU, quota, driver) it shares with its host's
other GPUs, so they set it apart only from other hosts' GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.core import rundir
from kit.results import noise
from kit.results.gpu_telemetry import HOSTS_APART, THROTTLED_SHARE
from kit.results.stats import UNTESTED, median, ratio_check


@dataclass(frozen=True)
class Seen:
    """What a row's evidence is read from: its host's capture, its runs (kit.core.rundir.RunEntry) and its GPU
    (nvidia-smi's index; None: a host's row, all its GPUs)."""

    capture: dict
    runs: list
    gpu: int | None = None

    @property
    def gpus(self) -> list[dict]:
        """The capture's GPUs of the row: its own, or all of its host's."""
        gpus = rundir.capture_gpus(self.capture)
        return gpus if self.gpu is None else gpus[self.gpu:self.gpu + 1]


def _quota(seen: Seen) -> str | None:
    quota = seen.capture.get("cpu_quota")
    if not isinstance(quota, dict):
        return "none" if "cpu_quota" in seen.capture else None
    return f"{quota['cores']:g} of a core (cgroup {quota['file'].rsplit('/', 1)[-1]})"


def _per_gpu(read: Callable[[dict, int], object]) -> Callable[[Seen], object]:
    """A GPU's field, read(gpu's capture, its index): a GPU's row its value, a host's 'GPU0: v, GPU1: v, ...'."""
    def field(seen: Seen) -> object:
        first = 0 if seen.gpu is None else seen.gpu
        values = [read(g, first + i) for i, g in enumerate(seen.gpus)]
        if all(v is None for v in values):
            return None
        return values[0] if seen.gpu is not None else ", ".join(f"GPU{first + i}: {v}" for i, v in enumerate(values))
    return field


def _gpus(key: str) -> Callable[[Seen], object]:
    return _per_gpu(lambda g, _i: g.get(key))


def _pcie(gpu: dict, _index: int) -> str | None:
    """'Gen5 x16 of Gen5 x16': the link in use, then the most it can train to (captured from 2026-12-05)."""
    now, top = (gpu.get("pcie_gen_current"), gpu.get("pcie_width_current")), \
        (gpu.get("pcie_gen_max"), gpu.get("pcie_width_max"))
    if now == (None, None):
        return None
    return f"Gen{now[0]} x{now[1]} of Gen{top[0]} x{top[1]}"


def _numa(seen: Seen) -> str | None:
    """The NUMA node and CPUs closest to each of the row's GPUs (nvidia-smi topo -m's affinities)."""
    topo = seen.capture.get("topology") or {}

    def node(_gpu: dict, index: int) -> str | None:
        name = f"GPU{index}"
        numa, cpus = (topo.get("numa_affinity") or {}).get(name), (topo.get("cpu_affinity") or {}).get(name)
        return None if numa is None and cpus is None else f"node {numa} (CPUs {cpus})"
    return _per_gpu(node)(seen)


def _other_load(seen: Seen) -> str | None:
    shares = [e.host_load.get("other_cpu_share") for e in seen.runs if isinstance(e.host_load, dict)]
    shares = [s for s in shares if isinstance(s, int | float)]
    if not shares:
        return None
    busy = max(shares) > noise.BUSY_OTHER_CPU_SHARE
    return f"{'busy: ' if busy else ''}other processes up to {max(shares):.0%} of the CPU"


UNTESTED_WORD = "untested: one run"

def _telemetry(key: str) -> Callable[[Seen], float | None]:
    """The median over a row's runs of its GPUs' `key` in their telemetry (run.json: kit.results.gpu_telemetry)."""
    def field(seen: Seen) -> float | None:
        values = [h[key] for e in seen.runs for h in ((e.fields.get("telemetry") or {}).get("hosts") or {}).values()
                  if isinstance(h, dict) and isinstance(h.get(key), int | float)]
        return round(median(values), 1) if values else None
    return field


@dataclass(frozen=True)
class Throttled:
    """The largest share of the measured window each throttle reason held over a row's runs; shown as the reasons
    over THROTTLED_SHARE ('hw_slowdown 38% of the window'), else 'none'."""

    shares: dict[str, float]

    def __str__(self) -> str:
        named = [f"{r} {v:.0%} of the window" for r, v in sorted(self.shares.items()) if v > THROTTLED_SHARE]
        return ", ".join(named) or "none"

    def apart(self, theirs: list) -> bool:
        """Some reason's share more than THROTTLED_SHARE outside the range of the peers' shares of it (a window
        of a few seconds holds few samples: a share moves by more than a sample's worth from run to run)."""
        peers = [t.shares for t in theirs if isinstance(t, Throttled)]
        for reason in {*self.shares, *(r for p in peers for r in p)} if peers else ():
            mine, their = self.shares.get(reason, 0.0), [p.get(reason, 0.0) for p in peers]
            if mine > max(their) + THROTTLED_SHARE or mine < min(their) - THROTTLED_SHARE:
                return True
        return False


def _throttled(seen: Seen) -> Throttled | None:
    tele = [e.fields["telemetry"] for e in seen.runs if isinstance(e.fields.get("telemetry"), dict)]
    if not tele:
        return None
    worst: dict[str, float] = {}
    for t in tele:
        for reason, share in (t.get("throttled") or {}).items():
            worst[reason] = max(worst.get(reason, 0.0), share)
    return Throttled(worst)


def _processes(seen: Seen) -> int | None:
    return sum(len(g.get("processes") or []) for g in seen.gpus) or None


# (what, how it is read from a row's capture and runs), most telling first
EVIDENCE: tuple[tuple[str, Callable[[Seen], object]], ...] = (
    ("CPU quota", _quota),
    ("CPUs its sessions may use", lambda s: s.capture.get("cpus_allowed")),
    ("other processes during the runs", _other_load),
    ("GPU throttled during the runs", _throttled),
    ("GPU SM clock during the runs (MHz, median)", _telemetry("sm_mhz_median")),
    ("GPU power limit during the runs (W)", _telemetry("limit_w")),
    ("GPU temperature peak during the runs (C)", _telemetry("temp_peak_c")),
    ("GPU SM clock max (MHz)", _gpus("max_sm_clock_mhz")),
    ("GPU application clock (MHz)", _gpus("app_graphics_clock_mhz")),
    ("GPU power limit (W)", _gpus("power_limit_w")),
    ("GPU PCIe link (in use of most)", _per_gpu(_pcie)),
    ("GPU processes before the runs", _processes),
    ("GPU NUMA node", _numa),
    ("GPU model", _gpus("product_name")),
    ("GPU ECC", _gpus("ecc_mode")),
    ("GPU driver", lambda s: (s.capture.get("smi") or {}).get("driver_version")),
    ("CPU model", lambda s: (s.capture.get("cpu") or {}).get("model_name")),
    ("logical CPUs", lambda s: (s.capture.get("cpu") or {}).get("logical_cpus")),
    ("memory (GiB)", lambda s: round(s.capture["memory_bytes"] / 2**30, 1) if s.capture.get("memory_bytes") else None),
    ("kernel", lambda s: s.capture.get("kernel")),
    ("OS", lambda s: s.capture.get("os_release")),
)


def _recorded_runs(part: Path) -> list:
    return list(rundir.read_run(part, missing_ok=True).runs.values())


def fleet_of(run_dir: Path | str, runs_of: Callable[[str, Path], list] | None = None,
             captures: dict[str, dict] | None = None) -> dict:
    """The fleet table of a sweep's directory (see the module's doc), as results.json keeps it: from each row's
    run.json and the captures' capture.json, or (kit verify) from RUNS_OF(row, its run directory), its runs as
    recomputed from its logs, and CAPTURES re-parsed from their raw outputs."""
    run_dir = Path(run_dir)
    sweep = rundir.read_sweep(run_dir)
    parts = rundir.sweep_parts(run_dir)
    recorded = sweep.get("rows") or {}
    names = [*parts, *(n for n in recorded if n not in parts and n.split("/")[0] in sweep["hosts"])]
    runs_of = runs_of or (lambda _row, part: _recorded_runs(part))
    runs = {name: runs_of(name, parts[name]) if name in parts else [] for name in names}
    gpus = {rundir.slice_name(host, gpu): (host, gpu) for host in sweep["hosts"]
            for gpu in rundir.sweep_slices(run_dir, host)}
    return fleet_table(names, recorded, runs, rundir.host_captures(run_dir) if captures is None else captures, gpus)


def sweep_report(run_dir: Path | str, fleet: dict) -> str:
    """A sweep's report.md: the fleet section, then each host's and GPU's report named (those its run directory
    has)."""
    run_dir = Path(run_dir)
    hosts = [f"- {name}: [{where}]({where})" for name, part in rundir.sweep_parts(run_dir).items()
             if (part / "report.md").is_file() and (where := (part / "report.md").relative_to(run_dir).as_posix())]
    return f"# Sweep {run_dir.name}\n\n{fleet_markdown(fleet)}\n## Each host's report\n\n" + "\n".join(hosts) + "\n"


def fleet_table(hosts: list[str], rows: dict[str, dict], runs: dict[str, list], captures: dict[str, dict],
                gpus: dict[str, tuple[str, int]] | None = None) -> dict:
    """PURE: the fleet table from each row's status (sweep.json), run entries (kit.core.rundir.RunEntry) and its
    host's capture; HOSTS: the rows, GPUS: {row: (host, GPU index)} of the rows that are one GPU of a host."""
    gpus = gpus or {}
    figures: dict[str, dict[str, list[float]]] = {}  # case -> row -> its runs' figures
    units: dict[str, str] = {}
    for host in hosts:
        for entry in runs.get(host, []):
            if entry.ok and isinstance(entry.figure, int | float) and entry.figure > 0:
                figures.setdefault(entry.case, {}).setdefault(host, []).append(float(entry.figure))
                units.setdefault(entry.case, entry.unit or "")
    cases = {case: _case(by_host) for case, by_host in sorted(figures.items())}
    table = []
    for host in hosts:
        row = rows.get(host) or {}
        mine = {case: c["hosts"][host] for case, c in cases.items() if host in c["hosts"]}
        worst = min((m["ratio"] for m in mine.values()), default=None)
        table.append({"host": host, "gpu": gpus[host][1] if host in gpus else None,
                      "status": row.get("status") or ("ok" if mine else "no runs"),
                      "reason": row.get("reason") or "", "cases": mine, "worst_ratio": worst,
                      "differs": any(m["differs"] for m in mine.values())})
    seen = {r["host"]: Seen(captures[machine], runs.get(r["host"], []), r["gpu"]) for r in table
            if (machine := gpus[r["host"]][0] if r["host"] in gpus else r["host"]) in captures}
    peers = [r["host"] for r in table if not r["differs"] and r["status"] == "ok"]
    for r in table:
        r["evidence"] = evidence(r["host"], peers, seen) if r["differs"] else []
    table.sort(key=lambda r: (r["status"] == "ok", r["worst_ratio"] if r["worst_ratio"] is not None else 0.0))
    return {"cases": {case: {"median": c["median"], "unit": units[case], "baseline": c["baseline"]}
                      for case, c in cases.items()},
            "hosts": table, "verdict": verdict(table)}


def _case(by_host: dict[str, list[float]]) -> dict:
    """One case over the fleet: its median (of the hosts' medians), the host whose runs are the fleet's median
    (the baseline) and each host's figure, ratio and noise verdict against the baseline's runs."""
    medians = {host: median(values) for host, values in by_host.items()}
    ordered = sorted(medians, key=lambda h: (medians[h], h))
    baseline = ordered[(len(ordered) - 1) // 2]
    fleet = median(list(medians.values()))
    out = {}
    for host, values in by_host.items():
        check = ratio_check(by_host[baseline], values)
        differs = host != baseline and check.apart
        noise_word = "the fleet's median" if host == baseline else \
            "differs" if differs else UNTESTED_WORD if check.verdict == UNTESTED else "within noise"
        out[host] = {"median": medians[host], "runs": values, "ratio": medians[host] / fleet, "differs": differs,
                     "interval": [check.low, check.high] if host != baseline else None, "noise": noise_word}
    return {"median": fleet, "baseline": baseline, "hosts": out}


def evidence(host: str, peers: list[str], seen: dict[str, Seen]) -> list[dict]:
    """Each EVIDENCE field whose value on row `host` is none of its peers' values: {what, row's value, peers'}."""
    found = []
    for what, read in EVIDENCE:
        value = read(seen[host]) if host in seen else None
        theirs = [read(seen[p]) for p in peers if p in seen]
        if value is None or not theirs or not _apart(value, theirs):
            continue
        found.append({"what": what, "host": _text(value), "peers": sorted({_text(v) for v in theirs})})
    return found


def _text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _apart(value, theirs: list) -> bool:
    """A figure more than HOSTS_APART outside its peers' range, throttling by its own rule (Throttled.apart),
    anything else none of their values."""
    if isinstance(value, Throttled):
        return value.apart(theirs)
    numbers = [v for v in theirs if isinstance(v, int | float) and not isinstance(v, bool)]
    if isinstance(value, int | float) and not isinstance(value, bool) and len(numbers) == len(theirs):
        return value < min(numbers) * (1 - HOSTS_APART) or value > max(numbers) * (1 + HOSTS_APART)
    return value not in theirs


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%".replace("-", "\u2212")


def _rows_are(table: list[dict]) -> str:
    gpus = sum(r.get("gpu") is not None for r in table)
    return "GPUs" if gpus == len(table) else "hosts" if not gpus else "hosts and GPUs"


def verdict(table: list[dict]) -> str:
    """One line: how many rows are within noise (and their widest spread), then each row that differs with its
    first two pieces of evidence, and each row that failed with why."""
    untested = [r for r in table if r["cases"] and any(c["noise"] == UNTESTED_WORD for c in r["cases"].values())]
    within = [r for r in table if r["status"] == "ok" and not r["differs"] and r["cases"] and r not in untested]
    spread = max((abs(c["ratio"] - 1) for r in within for c in r["cases"].values()), default=0.0)
    parts = [f"{len(within)} of {len(table)} {_rows_are(table)} within noise of the fleet's median "
             f"(\u00b1{spread * 100:.1f}%)"]
    for r in table:
        if r in untested and not r["differs"]:
            parts.append(f"{r['host']} {_pct(r['worst_ratio'])}: untested (one run on a side: its spread unknown)")
        elif r["differs"]:
            cause = ", ".join(f"{e['what']} {e['host']} against {' / '.join(e['peers'])} on its peers"
                              for e in r["evidence"][:2]) or "no evidence in its captures differs from its peers'"
            parts.append(f"{r['host']} {_pct(r['worst_ratio'])}: {cause}")
        elif r["status"] != "ok":
            parts.append(f"{r['host']} {r['status']}: {r['reason'] or 'no run gave a figure'}")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def fleet_markdown(fleet: dict) -> str:
    """report.md's section of a sweep: the verdict, the table worst first, each outlier's evidence."""
    lines = ["## Fleet", "", f"**{fleet['verdict']}**", "",
             "| host | case | figure | runs | ratio to fleet median | noise | status |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in fleet["hosts"]:
        if not r["cases"]:
            lines.append(f"| {r['host']} | | | | | | {_cell(r['status'])}: {_cell(r['reason'])} |")
        for case, c in sorted(r["cases"].items()):
            unit = fleet["cases"][case]["unit"]
            status = r["status"] + (f": {_cell(r['reason'])}" if r["reason"] else "")
            lines.append(f"| {r['host']} | {case} | {c['median']:.2f} {unit} | {len(c['runs'])} | "
                         f"{c['ratio']:.3f} ({_pct(c['ratio'])}) | {c['noise']} | {status} |")
    for r in fleet["hosts"]:
        if r["differs"]:
            lines += ["", f"Evidence for {r['host']} (what differs from its peers):"]
            lines += [f"- {e['what']}: {e['host']} (peers: {', '.join(e['peers'])})" for e in r["evidence"]] or \
                ["- nothing in its captures or run records differs from its peers'"]
    lines += ["", "A host (or one GPU of a host: host/gpuN, its 1-GPU cases pinned to it) differs when its runs "
              "against those of the row at the fleet's median pass kit compare's noise rule (the ratio's 95% interval "
              "excludes 1, each side's CV within 10%)."]
    return "\n".join(lines) + "\n"
