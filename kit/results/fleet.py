"""The fleet table of a sweep (kit sweep): per host per case its figure, its ratio to the fleet's median, whether it
differs from the fleet beyond noise, and for each host that does the evidence in which it differs from its peers.

    fleet = fleet_of(run_dir)          # from sweep.json, each host's run.json and the captures (kit.core.rundir)
    fleet["verdict"]                   # '2 of 3 hosts within noise of the fleet's median (±1.2%); h3 -61%: ...'
    fleet_markdown(fleet)              # report.md's section

A host's runs of a case are held against the runs of the host whose figure is the fleet's median by THE noise rule
(kit.results.stats.ratio_check, as kit compare's): it differs when the ratio's interval excludes 1 and neither side's
runs spread beyond the rule's CV. Evidence: each field of the host's capture and run records (EVIDENCE) whose value
is none of its peers' (the hosts that do not differ); a figure, more than HOSTS_APART outside their range.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kit.core import rundir
from kit.results import noise
from kit.results.gpu_telemetry import HOSTS_APART, THROTTLED_SHARE
from kit.results.stats import CONCLUSIVE, UNTESTED, median, ratio_check


def _quota(capture: dict, _runs: list) -> str | None:
    quota = capture.get("cpu_quota")
    if not isinstance(quota, dict):
        return "none" if "cpu_quota" in capture else None
    return f"{quota['cores']:g} of a core (cgroup {quota['file'].rsplit('/', 1)[-1]})"


def _gpus(key: str) -> Callable[[dict, list], str | None]:
    def field(capture: dict, _runs: list) -> str | None:
        gpus = (capture.get("smi") or {}).get("gpus") or []
        values = [g.get(key) for g in gpus if isinstance(g, dict)]
        return ", ".join(f"GPU{i}: {v}" for i, v in enumerate(values)) if any(v is not None for v in values) else None
    return field


def _other_load(_capture: dict, runs: list) -> str | None:
    shares = [e.host_load.get("other_cpu_share") for e in runs if isinstance(e.host_load, dict)]
    shares = [s for s in shares if isinstance(s, int | float)]
    if not shares:
        return None
    busy = max(shares) > noise.BUSY_OTHER_CPU_SHARE
    return f"{'busy: ' if busy else ''}other processes up to {max(shares):.0%} of the CPU"


UNTESTED_WORD = "untested: one run"

def _telemetry(key: str) -> Callable[[dict, list], float | None]:
    """The median over a host's runs of its GPUs' `key` in their telemetry (run.json: kit.results.gpu_telemetry)."""
    def field(_capture: dict, runs: list) -> float | None:
        values = [h[key] for e in runs for h in ((e.fields.get("telemetry") or {}).get("hosts") or {}).values()
                  if isinstance(h, dict) and isinstance(h.get(key), int | float)]
        return round(median(values), 1) if values else None
    return field


def _throttled(_capture: dict, runs: list) -> str | None:
    tele = [e.fields["telemetry"] for e in runs if isinstance(e.fields.get("telemetry"), dict)]
    if not tele:
        return None
    worst: dict[str, float] = {}
    for t in tele:
        for reason, share in (t.get("throttled") or {}).items():
            worst[reason] = max(worst.get(reason, 0.0), share)
    named = [f"{r} {v:.0%} of the window" for r, v in sorted(worst.items()) if v > THROTTLED_SHARE]
    return ", ".join(named) or "none"


# (what, how it is read from a host's capture and its runs), most telling first
EVIDENCE: tuple[tuple[str, Callable[[dict, list], str | None]], ...] = (
    ("CPU quota", _quota),
    ("CPUs its sessions may use", lambda c, _r: c.get("cpus_allowed")),
    ("other processes during the runs", _other_load),
    ("GPU throttled during the runs", _throttled),
    ("GPU SM clock during the runs (MHz, median)", _telemetry("sm_mhz_median")),
    ("GPU power limit during the runs (W)", _telemetry("limit_w")),
    ("GPU temperature peak during the runs (C)", _telemetry("temp_peak_c")),
    ("GPU SM clock max (MHz)", _gpus("max_sm_clock_mhz")),
    ("GPU application clock (MHz)", _gpus("app_graphics_clock_mhz")),
    ("GPU power limit (W)", _gpus("power_limit_w")),
    ("GPU processes before the runs", lambda c, _r: sum(len(g.get("processes") or [])
                                                       for g in (c.get("smi") or {}).get("gpus") or []) or None),
    ("GPU model", _gpus("product_name")),
    ("GPU ECC", _gpus("ecc_mode")),
    ("GPU driver", lambda c, _r: (c.get("smi") or {}).get("driver_version")),
    ("CPU model", lambda c, _r: (c.get("cpu") or {}).get("model_name")),
    ("logical CPUs", lambda c, _r: (c.get("cpu") or {}).get("logical_cpus")),
    ("memory (GiB)", lambda c, _r: round(c["memory_bytes"] / 2**30, 1) if c.get("memory_bytes") else None),
    ("kernel", lambda c, _r: c.get("kernel")),
    ("OS", lambda c, _r: c.get("os_release")),
)


def fleet_of(run_dir: Path | str) -> dict:
    """The fleet table of a sweep's directory (see the module's doc), as results.json keeps it."""
    run_dir = Path(run_dir)
    sweep = rundir.read_sweep(run_dir)
    captures = rundir.host_captures(run_dir)
    runs: dict[str, list] = {}
    for host in sweep["hosts"]:
        part = rundir.sweep_host_dir(run_dir, host)
        record = rundir.read_run(part, missing_ok=True)
        runs[host] = list(record.runs.values())
    return fleet_table(sweep["hosts"], sweep.get("rows") or {}, runs, captures)


def fleet_table(hosts: list[str], rows: dict[str, dict], runs: dict[str, list], captures: dict[str, dict]) -> dict:
    """PURE: the fleet table from each host's row (sweep.json), run entries (kit.core.rundir.RunEntry) and capture."""
    figures: dict[str, dict[str, list[float]]] = {}  # case -> host -> its runs' figures
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
        table.append({"host": host, "status": row.get("status") or ("ok" if mine else "no runs"),
                      "reason": row.get("reason") or "", "cases": mine, "worst_ratio": worst,
                      "differs": any(m["differs"] for m in mine.values())})
    peers = [r["host"] for r in table if not r["differs"] and r["status"] == "ok"]
    for r in table:
        r["evidence"] = evidence(r["host"], peers, runs, captures) if r["differs"] else []
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
        differs = host != baseline and check.verdict == CONCLUSIVE
        noise_word = "the fleet's median" if host == baseline else \
            "differs" if differs else UNTESTED_WORD if check.verdict == UNTESTED else "within noise"
        out[host] = {"median": medians[host], "runs": values, "ratio": medians[host] / fleet, "differs": differs,
                     "interval": [check.low, check.high] if host != baseline else None, "noise": noise_word}
    return {"median": fleet, "baseline": baseline, "hosts": out}


def evidence(host: str, peers: list[str], runs: dict[str, list], captures: dict[str, dict]) -> list[dict]:
    """Each EVIDENCE field whose value on `host` is none of its peers' values: {what, host's value, peers'}."""
    mine = captures.get(host)
    found = []
    for what, read in EVIDENCE:
        value = read(mine, runs.get(host, [])) if mine else None
        theirs = {p: read(captures[p], runs.get(p, [])) for p in peers if p in captures}
        if value is None or not theirs or not _apart(value, list(theirs.values())):
            continue
        found.append({"what": what, "host": _text(value), "peers": sorted({_text(v) for v in theirs.values()})})
    return found


def _text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _apart(value, theirs: list) -> bool:
    """A figure more than HOSTS_APART outside its peers' range, anything else none of their values."""
    numbers = [v for v in theirs if isinstance(v, int | float) and not isinstance(v, bool)]
    if isinstance(value, int | float) and not isinstance(value, bool) and len(numbers) == len(theirs):
        return value < min(numbers) * (1 - HOSTS_APART) or value > max(numbers) * (1 + HOSTS_APART)
    return value not in theirs


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%".replace("-", "\u2212")


def verdict(table: list[dict]) -> str:
    """One line: how many hosts are within noise (and their widest spread), then each host that differs with its
    first evidence, and each host that failed with why."""
    untested = [r for r in table if r["cases"] and any(c["noise"] == UNTESTED_WORD for c in r["cases"].values())]
    within = [r for r in table if r["status"] == "ok" and not r["differs"] and r["cases"] and r not in untested]
    spread = max((abs(c["ratio"] - 1) for r in within for c in r["cases"].values()), default=0.0)
    parts = [f"{len(within)} of {len(table)} hosts within noise of the fleet's median (\u00b1{spread * 100:.1f}%)"]
    for r in table:
        if r in untested and not r["differs"]:
            parts.append(f"{r['host']} {_pct(r['worst_ratio'])}: untested (one run on a side: its spread unknown)")
        elif r["differs"]:
            why = r["evidence"][0] if r["evidence"] else None
            cause = f"{why['what']} {why['host']} against {' / '.join(why['peers'])} on its peers" if why else \
                "no evidence in its captures differs from its peers'"
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
    lines += ["", "A host differs when its runs against those of the host at the fleet's median pass kit compare's "
              "noise rule (the ratio's 95% interval excludes 1, each side's CV within 10%)."]
    return "\n".join(lines) + "\n"
