"""The report's Markdown sections about a run: what was run, on what (settings), and each measured case against
its published reference. Pure: reads the run directory's run.json and the logs' run_start lines.

`suite` is any object with name, description, hardware and cases (kit.config.suites.Suite).
"""

from __future__ import annotations

from pathlib import Path

from kit.core.inputs import parse_json
from kit.core.layout import SIDECAR_SUFFIX
from kit.results.parsers.kitlog import read_run_start


def references_section(report, suite) -> str:
    """Each measured case that carries a published reference: median vs (value, lower, upper)."""
    by_key = {c.key: c for c in suite.cases if c.reference}
    rows = []
    for group in report.groups:
        for case in group.cases:
            key = group.key.case_key(case.name)
            ref = by_key[key].reference if key in by_key else None
            if ref is None:
                continue
            low, high = ref.bounds()
            comparable = ref.measures(group.unit)
            if not comparable:
                verdict = f"not comparable ({group.unit})"
            elif not ref.bounded:
                verdict = "shown (unbounded)"
            else:
                verdict = "within" if ref.holds(case.median) else "OUTSIDE"
            difference = f"{case.median / ref.value - 1:+.1%}" if comparable else ""
            rows.append(f"| {key} | {case.median:.2f} | {ref.value:g} {ref.unit} | "
                        f"{'' if low is None else f'{low:.2f}'} .. {'' if high is None else f'{high:.2f}'} | "
                        f"{difference} | {verdict} | {ref.source} |")
    if not rows:
        return ""
    head = ["", "### Against published references", "",
            "| case | median | reference | bounds | difference | verdict | source |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    return "\n".join(head + rows) + "\n"


def programs_section(report, framework_of: dict[str, str]) -> str:
    """Each published program's case beside the kit's harness case of the same framework, model, batch, nodes,
    GPUs and precision: how far the uniform harness is from the publisher's program on the same hardware.
    framework_of: program folder (ngc-pytorch, paddleclas, ...) -> the framework its harness case runs."""
    medians = {(g.key.framework, g.key.model, g.key.batch, c.name, g.key.precision): c.median
               for g in report.groups for c in g.cases}
    rows = []
    for (folder, model, batch, case, precision), program in sorted(medians.items()):
        harness = medians.get((framework_of.get(folder), model, batch, case, precision))
        if folder in framework_of and harness is not None:
            rows.append(f"| {folder}/{model}/bz{batch}/{case}/{precision} | {program:.2f} | "
                        f"{framework_of[folder]}: {harness:.2f} | {harness / program:.3f} |")
    if not rows:
        return ""
    head = ["", "### The kit's harness against the published programs", "",
            "| program case | program | harness | harness/program |", "| --- | --- | --- | --- |"]
    return "\n".join(head + rows) + "\n"


def program_data_section(logs: Path) -> str:
    """What each published program's run read: the host's data in the program's format, or its own synthetic
    mode (from the <log stem>.cmd.json records beside the logs)."""
    rows = []
    for sidecar in sorted(Path(logs).rglob("*" + SIDECAR_SUFFIX)):
        try:
            data = parse_json(sidecar.read_bytes()).get("data") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(data, dict):
            continue
        if data.get("mode") == "synthetic":
            what = f"synthetic: the program's own mode ({data.get('synthetic')})"
        elif data.get("path"):
            what = f"{data.get('format')} data at {data['path']}"
        else:
            what = "the publisher's default data path (no data root given)"
        rows.append(f"| {sidecar.relative_to(logs).as_posix().removesuffix(SIDECAR_SUFFIX)} | {what} |")
    if not rows:
        return ""
    head = ["", "### What the published programs read", "", "| run | data |", "| --- | --- |"]
    return "\n".join(head + rows) + "\n"


def _run_starts(run_dir: Path) -> list[dict]:
    found = (read_run_start(log) for log in sorted((run_dir / "logs").rglob("*.log")))
    return [start for start in found if start]


def settings_section(run_dir: Path, suite) -> str:
    """What was run, on what: the lines a reader needs before trusting the tables."""
    meta = parse_json((run_dir / "run.json").read_bytes()) if (run_dir / "run.json").is_file() else {}
    meta = meta if isinstance(meta, dict) else {}
    host = meta.get("host") if isinstance(meta.get("host"), dict) else {}
    starts = _run_starts(run_dir)
    lines = [f"Suite `{suite.name}` ({suite.description})."]
    if host:
        lines.append(f"Host: {host.get('hostname')}, {host.get('cpu')}, {host.get('cores')} cores, "
                     f"{host.get('memory_gib')} GiB, {host.get('os')}, Python {host.get('python')}.")
    versions = sorted({f"{s.get('framework')} {s.get('framework_version')}" for s in starts})
    if versions:
        lines.append("Frameworks: " + ", ".join(versions) + ".")
    shapes = [shape for _, shape in sorted({str(t): t for t in (  # by str: a value may be a list
        (s.get("model"), s.get("image_size"), s.get("num_classes"), s.get("warmup_steps"), s.get("measure_steps"),
         s.get("data"), s.get("device"), s.get("threads"), s.get("ranks")) for s in starts)}.items())]
    if shapes:
        lines.append("\n| model | image size | classes | warm-up steps | measured steps | data | device | "
                     "threads/process | processes |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        lines += ["| " + " | ".join(str(v) for v in shape) + " |" for shape in shapes]
        lines.append("")
    repeats = sorted({c.repeats for c in suite.cases})
    lines.append(f"Repeats per case: {'/'.join(map(str, repeats))} (interleaved); figure per run: global batch x "
                 "measured steps / sum of step seconds (the harness's timing rule); per case: median.")
    if suite.hardware == "cpu":
        lines.append("On a CPU, `<N>n<G>g` counts processes and they share this host's cores (threads/process "
                     "above): speedup compares one process on every core with G data-parallel processes on "
                     "cores/G each, so linear scaling is not expected; the gap is the data-parallel overhead.")
    if any(s.get("precision") == "amp" and not s.get("amp_effective") for s in starts):
        lines.append("**AMP was requested on a CPU: those runs are FP32** (AMP needs a GPU); their tables say amp "
                     "only because the suite asked for it.")
    skipped = meta.get("skipped_cases")
    if skipped and isinstance(skipped, list):
        lines.append(f"Not run on this host: {len(skipped)} case(s) (other runners or several nodes), see run.json.")
    refs = [c for c in suite.cases if c.reference]
    if refs:
        lines.append(f"{len(refs)} case(s) carry a published reference (value, bounds) in suite.yaml.")
    return "\n".join(lines) + "\n"
