"""The report's one harness ÷ program table: each published program's case beside the kit's harness case that trains
the same thing — framework, model, batch per GPU, nodes, GPUs per node, precision, data, image size, classes, and
the layout and mode the program runs in (its recipe decides them; the caller says what they are: `ran_as`).

A program whose mode no harness mode is (Paddle's static graph) pairs with the harness mode that builds the same kind
of program (KIN), and its row names both. Every program case with a figure is accounted for: paired (one row per
harness case of the same setting), or listed as not compared with the reason — its layout or mode is not known to
the kit (the program's own config decides), or no harness case of that setting has a figure, naming the nearest one
and what differs. A ratio of cases that differ in any of these would compare different work, so none is shown.

Pure: reads the report's medians and the suite's cases (kit.config.cases.Case, read by attribute).
"""

from __future__ import annotations

from collections.abc import Callable

# a program's mode that no harness mode is -> (the harness mode that builds the same kind of program, why): a row
# against it names both modes
KIN = {"static": ("compiled", "the harness's compiled Paddle is paddle.jit.to_static: a static program run by Paddle's "
                              "executor, as the program's static graph is (built from the eager network, not by hand)")}
SAME = ("framework", "model", "batch_size", "nodes", "gpus_per_node", "precision", "data", "image_size", "num_classes")
HEADING = "### The kit's harness ÷ the published program, same setting"  # bench/gpu_stages.py looks for it
NOT_COMPARED = "### Published programs not compared with the harness"


def program_ratio_section(report, suite, ran_as: Callable) -> str:
    """Markdown: one row per (program case, harness case) of the same setting that both have a median; then, as a
    list (a case's table row stays the one that starts with its key), each program case that has a median and no
    such row, with why. ran_as(job) -> the layout and mode the program's job trains in (kit.config.programs.ran_as:
    .layout, .mode, .why, .known)."""
    medians = {g.key.case_key(c.name): c.median for g in report.groups for c in g.cases}
    harness = [c for c in suite.cases if c.impl == "harness" and c.key in medians]
    rows, refused, kin = [], [], set()
    for program in (c for c in suite.cases if c.impl == "reference" and c.key in medians):
        ran = ran_as(program.ref_job())
        paired = _paired(harness, program, ran)
        for case in paired:
            ours, theirs = medians[case.key], medians[program.key]
            loader = f" (harness loader: {case.loader})" if case.loader else ""
            if case.mode != ran.mode:
                kin.add(ran.mode)
            rows.append(f"| {_setting(program, ran, case)}{loader} | {case.key} | {ours:.2f} | {program.key} | "
                        f"{theirs:.2f} | {ours / theirs:.3f} |")
        if not paired:
            refused.append(f"- {program.key} ({medians[program.key]:.2f}): {_why_not(program, ran, harness)}")
    out = []
    if rows:
        out += ["", HEADING, "",
                "Each figure by its own rule: the harness's (global batch x measured steps / their seconds), the "
                "program's by its publisher's reduction of its log; medians over the runs.", "",
                "| setting | harness case | harness | program case | program | harness ÷ program |",
                "| --- | --- | --- | --- | --- | --- |", *rows]
        out += [f"{mode} (harness: {KIN[mode][0]}): {KIN[mode][1]}." for mode in sorted(kin)]
    if refused:
        out += ["", NOT_COMPARED, "",
                "A ratio only of the same work: framework, model, batch per GPU, nodes, GPUs per node, precision, "
                "data, image size, classes, layout and mode. Not compared (program case, its median: why):", "",
                *refused]
    return "\n".join(out) + "\n" if out else ""


def same_setting(suite, ran_as: Callable) -> dict[str, list[str]]:
    """Harness case key -> the keys of the suite's published-program cases it trains the same thing as (the pairs
    the harness ÷ program table shows where both have a figure)."""
    harness = [c for c in suite.cases if c.impl == "harness"]
    out: dict[str, list[str]] = {}
    for program in (c for c in suite.cases if c.impl == "reference"):
        for case in _paired(harness, program, ran_as(program.ref_job())):
            out.setdefault(case.key, []).append(program.key)
    return out


def _paired(harness: list, program, ran) -> list:
    """The harness cases that train what the program trains (none where its layout or mode is not known)."""
    return [case for case in harness if ran.known and not _differences(case, program, ran)]


def _differences(case, program, ran) -> list[str]:
    """What a harness case runs otherwise than the program: 'layout nhwc (program: nchw)', ..."""
    mine = {k: getattr(case, k) for k in SAME} | {"layout": case.layout, "mode": case.mode}
    theirs = {k: getattr(program, k) for k in SAME} | {"layout": ran.layout, "mode": ran.mode}
    if KIN.get(ran.mode, ("",))[0] == case.mode:
        theirs["mode"] = case.mode  # the harness's kin of the program's mode (KIN): the row names both
    return [f"{k.replace('_', ' ')} {mine[k]} (program: {theirs[k]})" for k in mine if mine[k] != theirs[k]]


def _why_not(program, ran, harness: list) -> str:
    if not ran.known:
        return ran.why
    alike = [c for c in harness if (c.framework, c.model) == (program.framework, program.model)]
    if not alike:
        return f"no harness case of {program.framework} {program.model} has a figure in this run"
    nearest = min(alike, key=lambda c: (len(_differences(c, program, ran)), c.key))
    return (f"no harness case of its setting has a figure ({ran.layout}, {ran.mode}: {ran.why}); the nearest, "
            f"{nearest.key}, differs in {', '.join(_differences(nearest, program, ran))}")


def _setting(case, ran, harness=None) -> str:
    mode = ran.mode if harness is None or harness.mode == ran.mode else f"{ran.mode} (harness: {harness.mode})"
    return (f"{case.framework} {case.model}, batch {case.batch_size}/GPU, {case.case_dir}, {case.precision}, "
            f"{ran.layout}, {mode}, {case.data} data")
