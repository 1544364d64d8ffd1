"""What a host must hold before a published program runs there, checked in ONE shell script per host.

    script = needs_script(programs, data_dir, model_code, check_code=True)   # run on the host (SSH or srun)
    problems, mismatches = read_needs(programs, output)                      # its stdout, read back
    forced = settle(problems, mismatches, force, progress, RunError, "host")  # every host's, together

The script prints one tab-separated line per finding: `nodata <case> <path>`, `nocode <case> <path>`, and for
every checkout it found `checkout <case> <path> <top>` and its git answers (scripts/reference/code_state.py: the
same probes and judgement as this machine's pre-flight and the launcher's record), with its files under the pinned
paths where the kit lists the pinned tree (a copy that is no checkout, such as an unpacked archive, is judged by
them). The SSH runner runs it over each host's connection, the Slurm runner as one step on every node of the
allocation; both read it back here and settle what every host lacks here: the runs refused, or the checkouts off
their pins run forced (--force).
"""

from __future__ import annotations

from collections.abc import Callable

from kit.config import reference
from kit.config.cases import Case
from kit.hosts.connect import quote_cmd
from kit.run.plan import (
    code_dir,
    code_mismatch,
    code_state,
    describe_mismatch,
    pinned_commit,
    pinned_listing,
    saved_program_advice,
    saved_program_records,
)

Programs = list[tuple[str, Case]]  # (case key, case), the published-program cases of the runs


def needs_script(programs: Programs, data_dir: str | None, model_code: str | None, check_code: bool = True) -> str:
    """A POSIX shell script checking the data and (check_code) the model code of every program on one host."""
    lines = []
    for key, case in programs:
        if where := reference.data_path(data_dir, case.ref_job()):
            lines.append(f"[ -d {quote_cmd([where])} ] || printf 'nodata\\t%s\\t%s\\n' {quote_cmd([key, where])}")
        if check_code:
            root = model_code or reference.CODE_ROOT
            where = code_dir(case, root)
            impl = reference.implementation(case.framework, case.model)
            top = reference.checkout_dir(root, impl)
            listing = pinned_listing(impl.code)
            probes = code_state.shell(key, where, top, pinned_commit(case), listing.paths if listing else ())
            lines.append(f"if [ -d {quote_cmd([where])} ]; then printf 'checkout\\t%s\\t%s\\t%s\\n' "
                         f"{quote_cmd([key, where, top])}\n{probes}\n"
                         f"else printf 'nocode\\t%s\\t%s\\n' {quote_cmd([key, where])}; fi")
            lines += [f"[ -f {quote_cmd([record])} ] || printf 'nosaved\\t%s\\t%s\\t%s\\n' "
                      f"{quote_cmd([key, name, record])}" for name, record in saved_program_records(case, root)]
    return "\n".join([*lines, "exit 0", ""])


def read_needs(programs: Programs, output: str) -> tuple[list[str], list[dict]]:
    """(what is missing, one line each; checkouts off the pin, as kit.run.plan.code_mismatch records them)."""
    cases = dict(programs)
    problems, mismatches = [], []
    answers = code_state.read_shell(output)
    for line in output.splitlines():
        what, *fields = line.rstrip("\n").split("\t")
        if what == "nodata" and len(fields) == 2 and fields[0] in cases:
            key, where = fields
            fmt = reference.implementation(cases[key].framework, cases[key].model).data_format
            problems.append(f"no {fmt} data at {where} (case {key}; data_prep/convert.py --to {fmt}, "
                            f"then fab stage_data; or data: synthetic where the program has it)")
        elif what == "nocode" and len(fields) == 2 and fields[0] in cases:
            problems.append(f"no model code at {fields[1]} (case {fields[0]}; set the host's model_code)")
        elif what == "nosaved" and len(fields) == 3 and fields[0] in cases:
            impl = reference.implementation(cases[fields[0]].framework, cases[fields[0]].model)
            problems.append(f"{saved_program_advice(impl, [tuple(fields[1:])])} (case {fields[0]})")
        elif what == "checkout" and len(fields) == 3 and fields[0] in cases:
            key, where, top = fields
            pin = pinned_commit(cases[key])
            listing = pinned_listing(reference.implementation(cases[key].framework, cases[key].model).code)
            st = code_state.judge_host(answers.get(key, {}), top, pin, listing)
            if differs := code_mismatch(cases[key], where, top, st, pin):
                mismatches.append(differs)
    return problems, mismatches


def settle(problems: list[str], mismatches: list[dict], force: bool, progress: Callable[[str, str, str], None],
           refuse: type[Exception], where: str) -> list[dict]:
    """What a runner's check does with what its hosts lack (problems: "<host>: ..."; mismatches: code_mismatch
    records with their host): refuse the runs naming every problem and, unless force, every checkout off its pin;
    else say each forced one. The forced ones, sorted, for run.json (model_code_forced)."""
    if not force:
        problems = problems + [f"{m['host']}: {describe_mismatch(m)}; pass --force to run it anyway (the run records "
                               "it)" for m in mismatches]
    if problems:
        raise refuse(f"not every {where} has what the runs need, nothing started: " + "; ".join(problems))
    for m in mismatches:
        progress(m["host"], "forced", describe_mismatch(m))
    return sorted(mismatches, key=lambda m: (m["host"], m["case"]))
