"""What the GPU checks' stages report and read (bench/gpu_stages.py): the summary table's rows and their verdicts
by the kit's noise rule, and what a kit run directory holds (its figures, completion, telemetry, GPU)."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kit.hosts.capture.model import capture_from_dir  # noqa: E402
from kit.results import stats  # noqa: E402

# ResNet50 amp-nhwc bs256 on one GPU, images/s, by the GPU's name in the kit's capture (H200: 10% above the H100)
FIGURE_TARGETS = {"H100": 4500.0, "H200": 4950.0}


@dataclass
class Row:
    """One line of the summary table."""

    stage: str
    what: str
    figure: str
    target: str
    verdict: str  # stats.MET | MISSED | INCONCLUSIVE | UNTESTED, or failed | skipped | no target
    detail: str = ""

    @property
    def bad(self) -> bool:
        return self.verdict in (stats.MISSED, "failed")


def table(rows: list[Row]) -> str:
    lines = ["| stage | what | figure | target | verdict | detail |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r.stage} | {r.what} | {r.figure} | {r.target} | {r.verdict} | {r.detail} |" for r in rows]
    return "\n".join(lines)


def ratio_row(stage: str, what: str, base: list[float], mine: list[float], target: float,
              names: tuple[str, str]) -> Row:
    """median(mine) / median(base) against TARGET; failed when a side has no figure."""
    if not base or not mine:
        missing = " and ".join(n for n, v in zip(names, (base, mine), strict=True) if not v)
        return Row(stage, what, "—", f">= {target}", "failed", f"no {missing} figure")
    check = stats.ratio_check(base, mine)
    verdict = stats.ratio_target(check, target)
    interval = f"95% interval [{check.low:.3f}, {check.high:.3f}]" if check.verdict != stats.UNTESTED else ""
    detail = "; ".join(filter(None, [f"{names[1]} {stats.median(mine):.1f} / {names[0]} {stats.median(base):.1f}",
                                     f"runs {len(mine)} / {len(base)}", interval,
                                     check.why(names[0], names[1], advice=False)]))
    return Row(stage, what, f"{check.ratio:.3f}", f">= {target}", verdict, detail)


def figure_row(stage: str, what: str, values: list[float], gpu: str | None) -> Row:
    """The harness's ResNet50 amp-nhwc figure against the target of the GPU the kit's capture names."""
    if not gpu:
        return Row(stage, what, _median(values), "—", "failed", "the kit's capture names no GPU on this host")
    target = next((t for key, t in FIGURE_TARGETS.items() if key in gpu), None)
    if target is None:
        return Row(stage, what, _median(values), "—", "no target",
                   f"targets are set for {', '.join(FIGURE_TARGETS)}; this is {gpu}")
    if not values:
        return Row(stage, what, "—", f">= {target:.0f}", "failed", f"no harness figure ({gpu})")
    verdict, low, high = stats.figure_target(values, target)
    interval = f"95% interval [{low:.1f}, {high:.1f}]" if verdict != stats.UNTESTED else "one run"
    return Row(stage, what, _median(values), f">= {target:.0f}", verdict, f"{gpu}; runs {len(values)}; {interval}")


def _median(values: list[float]) -> str:
    return f"{stats.median(values):.1f}" if values else "—"


# ---------------------------------------------------------------------------------------------------------------
# what a run directory holds

def new_run_dir(runs_dir: Path, before: set[Path]) -> Path | None:
    made = sorted((p for p in runs_dir.iterdir() if p.is_dir() and p not in before), key=lambda p: p.stat().st_mtime)
    return made[-1] if made else None


def run_figures(run_dir: Path) -> dict[tuple[str, str, int, str], list[float]]:
    """(framework folder, model, batch, tag) -> the figures of its runs (1-GPU cases), from results.json, which kit
    bench writes after every run (a partial one after an interrupt: its finished runs); where there is none, from
    the harness logs' run_stop lines (the kit reads the step lines: the two agree within 0.001% on the H200's)."""
    path = run_dir / "results.json"
    if not path.is_file():
        return log_figures(run_dir)
    out = {}
    for group in json.loads(path.read_text())["groups"]:
        for case in group["cases"]:
            if case["case"] == "1n1g":
                key = (group["framework"], group["model"], group["batch_per_device"], group["precision"])
                out[key] = [r["value"] for r in case["runs"] if r.get("value")]
    return out


def log_figures(run_dir: Path) -> dict[tuple[str, str, int, str], list[float]]:
    """run_figures from the harness logs alone (logs/<framework>/<model>/bz<B>/1n1g/<model>_b<B>_<tag>_<n>.log),
    for a run directory without results.json: each whole log's successful run_stop figure, in repeat order."""
    out: dict[tuple[str, str, int, str], list[float]] = {}
    for log in sorted((run_dir / "logs").glob("*/*/bz*/1n1g/*.log"), key=lambda p: (p.parent, repeat_of(p))):
        framework, model, bz = log.parts[-5:-2]
        prefix = f"{model}_b{bz[2:]}_"
        if not log.name.startswith(prefix) or repeat_of(log) is None:
            continue  # not a harness log of this layout (a program's own files)
        tag = log.stem[len(prefix):].rsplit("_", 1)[0]
        figure = kitlog_figure(log.read_text(errors="replace"))
        if figure:
            out.setdefault((framework, model, int(bz[2:]), tag), []).append(figure)
    return out


def repeat_of(log: Path) -> int | None:
    tail = log.stem.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def kitlog_figure(text: str) -> float | None:
    """The samples_per_sec of a harness log's successful run_stop line, or None."""
    for line in reversed(text.splitlines()):
        if ":::KITLOG " in line and '"run_stop"' in line:
            stop = json.loads(line.split(":::KITLOG ", 1)[1])
            return stop.get("samples_per_sec") if stop.get("status") == "success" else None
    return None


def completion_note(run_dir: Path) -> str:
    """'' for a whole run; else what its figures are: a partial results.json's finished runs and the missing ones,
    or the logs' (no results.json)."""
    path = run_dir / "results.json"
    if not path.is_file():
        return "no results.json: figures re-derived from the run's logs"
    done = json.loads(path.read_text()).get("completion") or {}
    if done.get("state") != "partial":
        return ""
    missing = [f"{m['case']} #{m['repeat']}" for m in done.get("missing", [])]
    return (f"partial run: {len(done.get('finished', []))} of {done.get('planned')} runs finished"
            + (f"; missing {', '.join(missing)}" if missing else ""))


def telemetry_row(stage: str, run_dir: Path) -> Row:
    """Every run of the suite sampled beside it (results.json telemetry), each harness run's measured window covered;
    the detail: the J/image and SM clock of each case's runs."""
    path = run_dir / "results.json"
    runs = [(g, r) for g in json.loads(path.read_text())["groups"] for c in g["cases"] for r in c["runs"]] \
        if path.is_file() else []
    what = "GPU telemetry of every run (scripts/telemetry/gpu_sampler.py)"
    meta = run_dir / "run.json"
    if meta.is_file() and "gpu_telemetry" not in json.loads(meta.read_text()):
        return Row(stage, what, "—", "every run sampled", "no target", "a CPU suite: no GPU to sample")
    if not runs:
        return Row(stage, what, "—", "every run sampled", "failed", "no run gave a figure")
    missing = [r["file"] for _g, r in runs if not (r.get("telemetry") or {}).get("hosts")]
    hosts = [(g, r, h) for g, r in runs for h in (r.get("telemetry") or {}).get("hosts", {}).values()]
    bare = sorted({f"{r['file']}: {h['why'] or 'no samples'}" for _g, r, h in hosts if not h["source"]})
    thin = sorted(r["file"] for _g, r, h in hosts if h["source"] and (h["coverage"] or 0) < 0.8)
    said = sorted({f"{g['model']} {g['precision']}: {r['telemetry']['j_per_image']:.4f} J/image at "
                   f"{h['sm_mhz_median']:.0f} MHz" for g, r, h in hosts
                   if r["telemetry"].get("j_per_image") and h.get("sm_mhz_median")})
    bad = ([f"unsampled: {', '.join(missing)}"] if missing else []) + bare
    bad += [f"window not covered: {', '.join(thin)}"] if thin else []
    return Row(stage, what, f"{len(runs) - len(missing)}/{len(runs)}", "every run sampled",
               "failed" if bad else stats.MET, "; ".join(bad or said))


def gpu_name(run_dir: Path) -> str | None:
    """The first GPU's product name in the kit's own capture of the run's hosts (env/<host>/), re-parsed from the
    raw nvidia-smi output it kept."""
    for host_dir in sorted((run_dir / "env").glob("*/")):
        try:
            capture = capture_from_dir(host_dir.name, host_dir)
        except Exception as exc:  # noqa: BLE001  (a broken capture is reported, not fatal to the check)
            print(f"gpu-check: the capture of {host_dir.name} cannot be read: {exc}", flush=True)
            continue
        if capture.smi and capture.smi.gpus:
            return capture.smi.gpus[0].product_name
    return None


def keep(src: Path, dest: Path) -> None:
    """Copy a file or a folder into the output folder (links kept as links)."""
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    elif src.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def verdict_line(out: Path, stage: str, rows: list[Row]) -> None:
    bad = [r for r in rows if r.bad]
    worst = "FAILED" if bad else ("passed" if all(r.verdict in (stats.MET, "no target") for r in rows) else "unsure")
    text = f"{stage}: {worst}: " + "; ".join(f"{r.what} {r.figure} ({r.verdict})" for r in rows)
    (out / "verdict.txt").write_text(text + "\n")
    print(text, flush=True)
