"""The report's Markdown sections about a run: what was run, on what (settings), and each measured case against
its published reference. Pure: reads the run directory's run.json and the logs' run_start lines.

`suite` is any object with name, description, hardware and cases (kit.config.cases.Suite).
"""

from __future__ import annotations

from pathlib import Path

from kit.core.layout import SIDECAR_SUFFIX, find_logs
from kit.core.rundir import RunRecord, host_captures, read_run, sidecars
from kit.results import noise
from kit.results.parsers.kitlog import RECORDED, read_run_start, read_what_ran


def references_section(report, suite) -> str:
    """Each measured case beside every published figure its suite gives it: the bounded one checked (value, lower,
    upper), the others shown with what differs (batch, software, date); kit/published for each."""
    by_key = {c.key: c for c in suite.cases if c.references}
    rows = []
    for group in report.groups:
        for case in group.cases:
            key = group.key.case_key(case.name)
            declared = by_key.get(key)
            for ref in declared.references if declared else ():
                low, high = ref.bounds()
                comparable = ref.measures(group.unit)
                if not comparable:
                    verdict = f"not comparable ({group.unit})"
                elif not ref.bounded:
                    verdict = "shown (unbounded)"
                else:
                    verdict = "within" if ref.holds(case.median) else "OUTSIDE"
                ratio = f"{case.median / ref.value:.3f}" if comparable else ""
                rows.append(f"| {key} | {case.median:.2f} | {ref.value:g} {ref.unit} | "
                            f"{'' if low is None else f'{low:.2f}'} .. {'' if high is None else f'{high:.2f}'} | "
                            f"{ratio} | {verdict} | {ref.described()}{_published_math(ref, declared.precision)} |")
    if not rows:
        return ""
    head = ["", "### Against published references", "",
            "| case | median | reference | bounds | kit/published | verdict | source |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    return "\n".join(head + rows) + "\n"


def input_section(report, run_dir: Path) -> str:
    """Each real-data harness case: its loader, the loader's own rate (every process reading, no training step: the
    log's input_rate line) and the training figure; a figure within 10% of its loader's rate is flagged as
    possibly input-bound (a figure of the host's CPUs or decoder, not of the framework)."""
    logs, _ = find_logs(Path(run_dir) / "logs")
    found: dict[str, tuple[str, list[float]]] = {}
    outside: dict[str, list[int]] = {}  # case -> entries each run read from outside its data root
    decoding: dict[str, list[tuple[str, int, int, int]]] = {}  # case -> each run's decoder, calls, batches, refused
    for log in logs:
        ran = read_what_ran(log.path)
        if "input_rate" in ran:
            key = log.group.case_key(log.case)
            found.setdefault(key, (str(ran.get("loader") or "cpu"), []))[1].append(ran["input_rate"])
            if "decoded_batches" in ran and "decode_calls" in ran:
                decoding.setdefault(key, []).append((str(ran.get("decoder") or "its decoder"), ran["decode_calls"],
                                                     ran["decoded_batches"], ran.get("refused_batches", 0)))
            start = read_run_start(log.path) or {}
            if isinstance(n := start.get("outside_root"), int) and not isinstance(n, bool) and n > 0:
                outside.setdefault(key, []).append(n)
    rows, bound = [], 0
    for group in report.groups:
        for case in group.cases:
            key = group.key.case_key(case.name)
            if key not in found:
                continue
            loader, rates = found[key]
            alone = sorted(rates)[len(rates) // 2]
            share = noise.input_share(case.median, alone)
            flag = share >= noise.INPUT_BOUND_SHARE
            bound += flag
            rows.append(f"| {key} | {loader} | {alone:.1f} | {case.median:.1f} | {share:.0%} | "
                        f"{'**input-bound?**' if flag else 'no'} |")
    if not rows:
        return ""
    head = ["", "### Input pipeline", "",
            "Loader alone: images/s the loaders of all the run's processes deliver with no training step (the "
            "log's input_rate, median over runs); training: the case's median.", ""]
    if bound:
        within = 1 - noise.INPUT_BOUND_SHARE
        head += [f"**Warning: {bound} case(s) train within {within:.0%} of their loader's own rate: their figures "
                 "may measure the input pipeline, not the framework** (try loader: gpu or dali, or more CPU cores "
                 "per GPU).", ""]
    head += ["| case | loader | loader alone (img/s) | training (img/s) | share | input-bound |",
             "| --- | --- | --- | --- | --- | --- |"]
    rows += ["", *(f"{key}: {decoder} made {sum(r[1] for r in runs_)} decode calls for {sum(r[2] for r in runs_)} "
                   f"batches ({len(runs_)} run(s)), {sum(r[3] for r in runs_)} refused"
                   for key, runs_ in sorted(decoding.items()) for decoder in sorted({r[0] for r in runs_}))
             ] if decoding else []
    rows += ["", *(f"{key} read {max(counts)} list entries from outside its data root (--allow-outside-root, in "
                   f"{len(counts)} run(s)): its images are not all the data root's" for key, counts
                   in sorted(outside.items()))] if outside else []
    return "\n".join(head + rows) + "\n"


def _published_math(ref, precision: str) -> str:
    if not ref.math or ref.math == precision:
        return ""
    return (f" (published as {precision.upper()}; the publisher's framework ran {ref.math.upper()}, its default "
            "on this GPU generation)")


def program_data_section(logs: Path) -> str:
    """What each published program's run read: the host's data in the program's format, or its own synthetic
    mode (from the <log stem>.cmd.json records beside the logs)."""
    rows = []
    for sidecar, record in sidecars(logs, ("",)):
        data = record.get("data") or {}
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


def program_placeholder_section(run_dir: Path) -> str:
    """One line per module a published program imports but its host lacked, for which the kit's import placeholder
    stood in (scripts/reference/placeholders), from every host's command record."""
    stood: dict[str, set[str]] = {}  # module -> the runs' hosts
    for _sidecar, meta in sidecars(run_dir):
        placed = meta.get("placeholders")
        for entry in placed if isinstance(placed, list) else []:
            if isinstance(entry, dict) and entry.get("placeholder"):
                stood.setdefault(str(entry.get("module")), set()).add(str(meta.get("host") or "?"))
    return "".join(f"\nThe published program imports {module}, which the Python of {', '.join(sorted(hosts))} "
                   f"lacks: the kit's import placeholder stood in (scripts/reference/placeholders); the program never "
                   f"calls it in the modes the kit runs, and would stop naming it if it did.\n"
                   for module, hosts in sorted(stood.items()))


def program_scratch_section(run_dir: Path) -> str:
    """One line on what the published programs saved where they ran (checkpoints): the scratch folders outside
    the run directory that scripts/reference/launch.py made and removed, from every host's command record."""
    folders: dict[str, dict] = {}  # by path: rank 0's record is also beside its log
    for _sidecar, record in sidecars(run_dir):
        scratch = record.get("scratch")
        if isinstance(scratch, dict) and isinstance(scratch.get("path"), str):
            folders[scratch["path"]] = scratch
    if not folders:
        return ""
    done = [f for f in folders.values() if isinstance(f.get("removed"), list) and "error" not in f]
    files, size = sum(len(f["removed"]) for f in done), sum(int(f.get("bytes") or 0) for f in done)
    line = (f"\nWhat the published programs saved where they ran (checkpoints) went to a scratch folder outside the "
            f"run directory, removed after each run: {files} file(s), {size} bytes ({size / 2**20:.1f} MiB) in "
            f"{len(done)} run(s); a bundle never holds them.\n")
    left = sorted(path for path, f in folders.items() if f not in done)
    if left:  # stopped before it could clean up (SIGKILL), or removing failed
        line += f"Scratch folder(s) not removed (see their command records): {', '.join(left)}.\n"
    return line


def _run_starts(run_dir: Path) -> list[dict]:
    found = (read_run_start(log) for log in sorted((run_dir / "logs").rglob("*.log")))
    return [start for start in found if start]


def _cudnn(version) -> str | None:
    """torch.backends.cudnn.version()'s 91900 -> '9.19.0'; Paddle's strings as they are."""
    if isinstance(version, bool) or version in (None, ""):
        return None
    if isinstance(version, int) and version >= 1000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}" if version >= 10000 else \
            f"{version // 1000}.{version % 1000 // 100}.{version % 100}"
    return str(version)


def accelerators_lines(run_dir: Path, starts: list[dict]) -> list[str]:
    """Each host's GPUs from its capture (count x product, memory, driver, CUDA) and the cuDNN the frameworks
    reported: the line a reader needs to know what the figures are figures of."""
    lines = []
    for host, capture in host_captures(run_dir).items():
        smi = capture.get("smi")
        if not isinstance(smi, dict) or not isinstance(smi.get("gpus"), list) or not smi["gpus"]:
            continue
        kinds: dict[tuple, int] = {}
        for gpu in smi["gpus"]:
            if isinstance(gpu, dict):
                kind = (gpu.get("product_name") or "unknown GPU", gpu.get("memory_total_mib"))
                kinds[kind] = kinds.get(kind, 0) + 1
        gpus = " + ".join(f"{n}x {name}" + (f" ({memory} MiB)" if memory else "")
                          for (name, memory), n in sorted(kinds.items(), key=str))
        lines.append(f"Accelerators of {host}: {gpus}, driver {smi.get('driver_version')}, "
                     f"CUDA {smi.get('cuda_version')} (the driver's).")
    stacks = sorted({f"{s.get('framework')} {s.get('framework_version')}: CUDA {s.get('cuda_version')}, "
                     f"cuDNN {_cudnn(s.get('cudnn_version'))}" for s in starts
                     if s.get("device") == "gpu" and (s.get("cuda_version") or s.get("cudnn_version"))})
    if stacks:
        lines.append("Framework builds: " + "; ".join(stacks) + ".")
    return lines


def describe_math(ran: dict) -> str:
    """'fp16 autocast + loss scaling; TF32 off' from the math flags a harness log recorded."""
    math = ran.get("math")
    if not isinstance(math, dict):  # a log of the harness before math modes
        autocast = "fp16 autocast + loss scaling; " if ran.get("amp_effective") is True else ""
        if ran.get("device") == "gpu":
            return autocast + ("TF32 not recorded (the framework's default: on for cuDNN convolutions on Ampere "
                               "and later)")
        return autocast + "not recorded"
    parts = []
    autocast = math.get("autocast")
    if autocast:
        parts.append(f"{'bf16' if 'bf' in str(autocast) else 'fp16'} autocast"
                     + (" + loss scaling" if math.get("loss_scaling") else ""))
    tf32 = {k.removeprefix("tf32_"): v for k, v in math.items() if k.startswith("tf32_") and isinstance(v, bool)}
    if tf32:
        on = [k for k, v in tf32.items() if v]
        parts.append("TF32 off" if not on else "TF32 on (" + ", ".join(sorted(on)) + ")"
                     + ("" if len(on) == len(tf32) else " only"))
    return "; ".join(parts) or "fp32"


def execution_section(run_dir: Path) -> str:
    """Per case: the precision asked for and the math the framework had (from the log), the other settings the
    contract records (scripts/harness/contract.py: loader, layout, mode, ...), and the compile time."""
    logs, _ = find_logs(run_dir / "logs")
    shown = [field for field in RECORDED if field != "precision"]
    rows: dict[str, list[str]] = {}
    for log in logs:
        ran = read_what_ran(log.path)
        if not ran:
            continue
        compile_s = ran.get("compile_seconds")
        settings = [str(ran.get(field) or "") for field in shown]
        if "mode" in shown and not ran.get("mode"):
            settings[shown.index("mode")] = "eager"
        row = [describe_math(ran) + (" — " + str(ran["note"]) if ran.get("note") else ""), *settings,
               f"{compile_s:.1f}" if isinstance(compile_s, (int, float)) else ""]
        key = log.group.case_key(log.case)
        if key in rows and rows[key][:-1] != row[:-1]:
            rows[key][0] += " (runs differ: see run.json)"
        rows.setdefault(key, row)
    if not rows:
        return ""
    head = ["", "| case | math the framework had | " + " | ".join(shown) + " | compile s (first step) |",
            "| --- " * (len(shown) + 3) + "|"]
    return "\n".join(head + [f"| {key} | " + " | ".join(row) + " |" for key, row in sorted(rows.items())]) + "\n"


def provenance_lines(run: RunRecord) -> list[str]:
    """What run.json says of the code and environment that ran, where a reader must know it: a kit checkout with
    uncommitted changes or of unknown revision, and the inherited variables that change what runs."""
    lines = []
    commit = run.kit_commit
    if commit.get("dirty") is True:
        lines.append(f"**The kit's checkout had uncommitted changes** when the run started (commit "
                     f"{str(commit.get('commit'))[:12]}, run.json kit_commit): what ran is known by the harness "
                     "files' sha256 in run.json (harness_sha256), not by the commit.")
    elif commit and commit.get("commit") is None:
        lines.append(f"The kit's revision is unknown ({str(commit.get('error') or 'no commit')[:120]}).")
    forced = run.model_code_forced
    if forced:
        lines.append(f"**{len(forced)} published-program run(s) ran forced off the pin** (kit bench --force, run.json "
                     "model_code_forced): their figures are not the published programs' at their pins, and kit verify "
                     "fails them (rule set v6, program_code_at_pin): " + "; ".join(
                         f"{str(m.get('case'))[:120]} on {str(m.get('host'))[:60]}: {str(m.get('reason'))[:300]}"
                         for m in forced[:10]) + (f"; and {len(forced) - 10} more" if len(forced) > 10 else "") + ".")
    env = run.inherited_environment
    if env:
        lines.append("Inherited environment that changes what runs (run.json inherited_environment): "
                     + ", ".join(f"`{k}={str(v)[:80]}`" for k, v in sorted(env.items())[:20])
                     + (f" and {len(env) - 20} more" if len(env) > 20 else "") + ".")
    return lines


def settings_section(run_dir: Path, suite) -> str:
    """What was run, on what: the lines a reader needs before trusting the tables."""
    run = read_run(run_dir, missing_ok=True)
    host = run.host
    starts = _run_starts(run_dir)
    lines = [f"Suite `{suite.name}` ({suite.description})."]
    if host:
        lines.append(f"Host: {host.get('hostname')}, {host.get('cpu')}, {host.get('cores')} cores, "
                     f"{host.get('memory_gib')} GiB, {host.get('os')}, Python {host.get('python')}.")
    lines += accelerators_lines(run_dir, starts)
    lines += noise.host_load_lines(run)
    lines += provenance_lines(run)
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
        lines.append(execution_section(run_dir))
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
    skipped = run.skipped
    if skipped:
        lines.append(f"Not run on this host: {len(skipped)} case(s) (other runners or several nodes), see run.json.")
    refs = [c for c in suite.cases if c.reference]
    if refs:
        lines.append(f"{len(refs)} case(s) carry a published reference (value, bounds) in suite.yaml.")
    return "\n".join(lines) + "\n"
