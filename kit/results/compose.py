"""The run's report from its logs alone: the tables (kit.results.report) and the sections that say what was run
and how it compares (kit.results.sections, kit.results.program_ratio). One composer for what a run writes
(kit.run.bench.write_report: `kit bench`, `kit multinode`, `kit cluster`) and what `kit verify` recomputes from a
bundle (kit.audit.evidence), so that report.md can be compared line for line.

Pure, as all of kit.results: it imports nothing above kit.core, so what it must know of the published programs
and their images comes from the caller, always the same three (kit.run.bench.compose_report, kit.audit.evidence):

    method_for       kit.config.reference.log_reduction: a program log's (reduction, format), None for the harness's
    ran_as           kit.config.programs.ran_as: the layout and mode a program's job trains in, or why unknown
    program_stacks   kit.images.parity.program_stacks: the pinned CUDA/cuDNN of the programs' images that ran

`suite` is any object with name, description, hardware and cases (kit.config.cases.Suite).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from kit.core import filecache
from kit.core.inputs import InputError
from kit.core.rundir import RunRecord, host_yardsticks, read_run
from kit.results import noise
from kit.results.extract import HARNESS_METHOD
from kit.results.parsers.records import NON_FINITE
from kit.results.program_ratio import program_ratio_section, same_setting
from kit.results.published import published_figures
from kit.results.report import LAYOUT, Completion, Report, build_report, framework_rows, ratio_pair
from kit.results.reproduction import TABLE_NAME
from kit.results.sections import (
    input_section,
    program_data_section,
    program_placeholder_section,
    program_scratch_section,
    references_section,
    settings_section,
)
from kit.results.standing import answer_lines, plot_marks, stand, summary_markdown


def compose_report(run_dir: Path, suite, *, method_for: Callable, ran_as: Callable,
                   program_stacks: Callable[[object, set[str]], list[str]], layout: int = LAYOUT) -> Report:
    """The run's report in LAYOUT (kit.results.report.LAYOUTS): its logs by their own rules (the harness's, each
    program's publisher's), titled with the run's folder, and its settings sections; each harness log read once."""
    with filecache.cached():
        return _compose_report(Path(run_dir), suite, method_for, ran_as, program_stacks, layout)


def _compose_report(run_dir: Path, suite, method_for: Callable, ran_as: Callable,
                    program_stacks: Callable[[object, set[str]], list[str]], layout: int) -> Report:
    report = build_report(run_dir / "logs", HARNESS_METHOD, method_for=method_for, layout=layout)
    frameworks, rows = framework_rows(report)
    report.pair = ratio_pair(frameworks, rows, {c.log_framework: c.framework for c in suite.cases})
    report.title = f"{suite.name} benchmark: {run_dir.name}"
    ran = {g.key.case_key(c.name) for g in report.groups for c in g.cases}
    stacks = program_stacks(suite, ran)
    programs = f"Published programs' images (pins): {'; '.join(stacks)}.\n" if stacks else ""
    report.settings = (settings_section(run_dir, suite) + programs + references_section(report, suite)
                       + input_section(report, run_dir) + program_ratio_section(report, suite, ran_as)
                       + program_data_section(run_dir / "logs") + program_scratch_section(run_dir)
                       + program_placeholder_section(run_dir))
    report.devices = "processes" if suite.hardware == "cpu" else "GPUs"
    report.completion = completion_of(run_dir)
    if layout > 1 and (run_dir / TABLE_NAME).is_file():  # its truth: kit.audit.pair against reproduction.json
        report.reproduction = (run_dir / TABLE_NAME).read_text(encoding="utf-8", errors="replace")
    if suite.hardware != "cpu":
        report.standing = standing_of(run_dir, report, suite, ran_as)
    report.warnings = run_warnings(run_dir, report)
    return report


def run_warnings(run_dir: Path, report: Report) -> list[str]:
    """What a reader must see before the figures: a partial run, runs on a busy host, published code forced off its
    pin, runs that trained on a non-finite loss (Markdown lines; the page puts them above the fold)."""
    out = []
    if report.completion and not (report.completion.complete and not report.completion.gone):
        out.append(report.completion.line())
    try:
        run = read_run(run_dir, missing_ok=True)
    except InputError:
        run = RunRecord(None, {})
    entries = list(run.runs.values())
    busy = [w for e in entries if (w := noise.busy_warning(e.host_load))]
    if busy:
        out.append(f"{len(busy)} of {len(entries)} runs: {busy[0]}")
    if forced := run.model_code_forced:
        cases = sorted({str(f.get("case")) for f in forced})
        out.append(f"published program code run off its pin (kit bench --force, recorded in run.json): "
                   f"{', '.join(cases)}")
    nan = [path for path, why in report.failures if NON_FINITE in why]
    if nan:
        out.append(f"{len(nan)} run(s) trained on a non-finite loss and give no figure: "
                   + ", ".join(f"`{Path(p).name}`" for p in nan))
    return out


def suite_knowledge(suite, ran_as: Callable) -> tuple[dict, dict, dict]:
    """(references, settings, pairs) per case key: the suite's own references, what each published program's recipe
    says its job ran (layout, data), which run.json does not record, and the programs each harness case trains the
    same thing as (kit.results.program_ratio.same_setting)."""
    references = {c.key: list(c.references) for c in suite.cases if getattr(c, "references", None)}
    settings = {}
    for case in suite.cases:
        if case.impl == "reference":
            job = case.ref_job()
            settings[case.key] = {"layout": ran_as(job).layout,
                                  "data": "synthetic" if job.data == "synthetic" else "real"}
    return references, settings, same_setting(suite, ran_as)


def standing_of(run_dir: Path, report: Report, suite, ran_as: Callable) -> str:
    """Where the GPU run stands against the published figures the kit holds (kit.results.standing), the suite's
    references and its programs' recipes included; a line saying why where its records cannot be read."""
    try:
        references, settings, pairs = suite_knowledge(suite, ran_as)
        ladder = report.layout > 3
        answer = stand(run_dir, report.to_dict(), published_figures(), references, settings, pairs=pairs,
                       ladder=ladder, hardware=measured_here(run_dir) if ladder else None)
    except (InputError, ValueError, TypeError, KeyError) as exc:
        return f"Where this run stands against published figures: not formed ({str(exc)[:200]})\n"
    if ladder:
        report.answer = answer_lines(answer)
        report.marks = plot_marks(answer)
    return summary_markdown(answer)


def measured_here(run_dir: Path):
    """kit yardstick's judgement of the run's first host as its run directory keeps it (env/<host>/yardstick.json),
    held to the datasheet alone: what a bundle carries, so verify recomputes the same; None without one."""
    from kit.results.yardstick import judge, load_datasheets, read_yardstick

    kept = host_yardsticks(run_dir)
    if not kept:
        return None
    try:
        return judge(read_yardstick(next(iter(kept.values()))), load_datasheets())
    except InputError:
        return None


def log_in_run(run_dir: Path, log: str) -> bool:
    """Whether run.json's relative log path names a file inside the run directory (never a path out of it)."""
    rel = PurePosixPath(log)
    return not rel.is_absolute() and ".." not in rel.parts and (Path(run_dir) / rel).is_file()


def completion_of(run_dir: Path) -> Completion | None:
    """The runs kit bench planned (run.json planned_runs), those run.json records as ended, and whether the bench
    reached its end (run.json finished); None for a run directory that records no plan (older runs, kit multinode)."""
    run = read_run(run_dir, missing_ok=True)
    if run.planned is None:
        return None
    recorded = run.runs
    runs = [(p.case, p.repeat, p.log) for p in run.planned]
    ended = [(case, repeat, log) for case, repeat, log in runs if log in recorded]
    there = [(case, repeat, log) for case, repeat, log in ended if log_in_run(run_dir, log)]
    return Completion(planned=[(case, repeat) for case, repeat, _ in runs],
                      finished=[(case, repeat) for case, repeat, _ in there],
                      complete=run.finished is not None and len(there) == len(runs),
                      gone=[run for run in ended if run not in there])
