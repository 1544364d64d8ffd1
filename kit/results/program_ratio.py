"""The report's harness ÷ program table: each published program's case beside the kit's harness case that trains the
same thing — framework, model, batch per GPU, nodes, GPUs per node, precision, data, image size, classes, and the
layout and mode the program runs in (its command decides them; the caller says what they are: `ran_as`).

Pure: reads the report's medians and the suite's cases (kit.config.suites.Case, read by attribute). A program whose
layout and mode the caller does not know (`ran_as` gives None) gets no row: without them a ratio would compare
different work.
"""

from __future__ import annotations

from collections.abc import Callable

SAME = ("framework", "model", "batch_size", "nodes", "gpus_per_node", "precision", "data", "image_size", "num_classes")


def program_ratio_section(report, suite, ran_as: Callable[[object], tuple[str, str] | None]) -> str:
    """Markdown: one row per (program case, harness case) of the same setting that both have a median.
    ran_as(job) -> (layout, mode) the program's job trains in (kit.config.programs.layout_and_mode), or None."""
    medians = {g.key.case_key(c.name): c.median for g in report.groups for c in g.cases}
    harness = [c for c in suite.cases if c.impl == "harness" and c.key in medians]
    rows = []
    for program in (c for c in suite.cases if c.impl == "reference" and c.key in medians):
        shape = ran_as(program.ref_job())
        if shape is None:
            continue
        for case in harness:
            if all(getattr(case, k) == getattr(program, k) for k in SAME) and (case.layout, case.mode) == shape:
                ours, theirs = medians[case.key], medians[program.key]
                loader = f" (harness loader: {case.loader})" if case.loader else ""
                rows.append(f"| {_setting(program, shape)}{loader} | {case.key} | {ours:.2f} | {program.key} | "
                            f"{theirs:.2f} | {ours / theirs:.3f} |")
    if not rows:
        return ""
    head = ["", "### The kit's harness ÷ the published program, same setting", "",
            "Each figure by its own rule: the harness's (global batch x measured steps / their seconds), the "
            "program's by its publisher's reduction of its log; medians over the runs.", "",
            "| setting | harness case | harness | program case | program | harness ÷ program |",
            "| --- | --- | --- | --- | --- | --- |"]
    return "\n".join(head + rows) + "\n"


def _setting(case, shape: tuple[str, str]) -> str:
    layout, mode = shape
    return (f"{case.framework} {case.model}, batch {case.batch_size}/GPU, {case.case_dir}, {case.precision}, "
            f"{layout}, {mode}, {case.data} data")
