"""Predicates on the published programs' runs, from their command records (<log stem>.cmd.json) alone. Pure.

Every record of a run is judged: each host's (hosts/<host>/<run folder>/) where the run was gathered from hosts,
else the one beside its log (a run on this machine). The auditor's kit rebuilds each command from its own
recipes (kit.config.reference) and pins (docker/pins.yaml); nothing the bundle says about itself is trusted.
"""

from __future__ import annotations

from pathlib import Path

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.config import reference
from kit.config.programs import ran_as
from kit.core.catalogue import load
from kit.core.inputs import parse_json
from kit.core.layout import RunLog, run_folder, sidecar_name
from kit.core.secrets import redact
from kit.images.spec import pin_of
from kit.results.parsers import echo
from kit.results.parsers.logtext import read_log_text
from kit.results.parsers.records import ParseError

code_state = load("code_state", "reference")  # scripts/reference/code_state.py: what "at the pin" means


RECORD_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError, reference.ReferenceError)


def program_runs(ev: Evidence) -> list[tuple[str, RunLog, list[tuple[str, Path]]]]:
    """(case key, log, [(host, command record)]) of every run of a published program in the report (found once
    per Evidence: each program rule reads them)."""
    return ev.memo("program_runs", lambda: _program_runs(ev))


def _program_runs(ev: Evidence) -> list[tuple[str, RunLog, list[tuple[str, Path]]]]:
    out = []
    hosts = ev.root / "hosts"
    host_dirs = sorted(hosts.iterdir()) if hosts.is_dir() else []
    for key, log, _figure in ev.runs():
        if reference.log_reduction(log) is None:
            continue
        folder = run_folder(log.path.relative_to(ev.root / "logs"))
        name = sidecar_name(log.path.name)
        found = [(h.name, h / folder / name) for h in host_dirs if (h / folder / name).is_file()]
        out.append((key, log, found or [("local", log.path.with_name(name))]))
    return out


def judged_records(ev: Evidence, out: Finding):
    """(case key, log, host, record path, record, every (host, path) of the run) of each readable record, counted
    on `out`; an unreadable one is a violation."""
    for key, log, records in program_runs(ev):
        for host, path in records:
            out.checked += 1
            try:
                meta = parse_json(path.read_bytes())
                if not isinstance(meta, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                out.fail(f"the run's command record cannot be read: {exc}"[:300], ev.rel(path))
                continue
            yield key, log, host, path, meta, records


@predicate(versions={1: {"case_data": False}, 2: {"case_data": True}})
def program_command_is_recipe(ev: Evidence, out: Finding, case_data: bool) -> None:
    """Each record names the job its log's place says (program, model, batch, precision, nodes, GPUs; CASE_DATA
    (@2): and the data its suite's case reads, synthetic or a dataset), and its argv, working directory,
    environment (and the folders put before its host's PYTHONPATH) and patch are what this kit's recipe builds for
    that job there."""
    for key, log, host, path, meta, _records in judged_records(ev, out):
        where = ev.rel(path)
        g = log.group
        want = {"impl": g.framework, "model": g.model, "batch_size": g.batch, "precision": g.precision,
                "nodes": log.nodes, "gpus_per_node": log.gpus_per_node}
        case = ev.cases.get(key)
        if case_data and case is not None:
            data = meta.get("data")
            have = data.get("mode") if isinstance(data, dict) else None
            if have != case.data:
                out.fail(f"{key} ({host}): the record's data {have!r} is not its case's ({case.data!r}, suite.yaml)"
                         [:300], where)
                continue
        wrong = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
        if wrong:
            out.fail(f"{key} ({host}): the record names another job than its log's place: {wrong}", where)
            continue
        try:
            built = reference.rebuild(meta)
        except RECORD_ERRORS as exc:
            out.fail(f"{key} ({host}): no recipe builds the recorded job: {exc}"[:300], where)
            continue
        env, pythonpath = meta.get("env"), meta.get("pythonpath")
        if pythonpath is None and isinstance(env, dict) and "PYTHONPATH" in env:  # older records: the folders stood
            env = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # in the env, in place of the host's own
            old = meta["env"]["PYTHONPATH"]
            pythonpath = old.split(":") if isinstance(old, str) else old
        have = {"argv": meta.get("argv"), "cwd": meta.get("cwd"), "env": env, "pythonpath": pythonpath or [],
                "work_copy": meta.get("work_copy"), "patch": meta.get("patch"), "add": meta.get("add")}
        recipe = {"argv": built.argv, "cwd": built.cwd, "env": redact(built.env),
                  "pythonpath": list(built.pythonpath),
                  "work_copy": built.work_copy, "patch": built.patch, "add": list(built.add)}
        for field, value in recipe.items():
            if have[field] != value:
                out.fail(f"{key} ({host}): {field} {have[field]!r} is not the recipe's {value!r}"[:600], where)


@predicate(versions={1: {"clean": False, "forced_passes": True, "older_named": False},
                     2: {"clean": True, "forced_passes": True, "older_named": False},
                     3: {"clean": True, "forced_passes": False, "older_named": False},
                     4: {"clean": True, "forced_passes": False, "older_named": True}})
def program_code_pinned(ev: Evidence, out: Finding, clean: bool, forced_passes: bool, older_named: bool) -> None:
    """Each run's model code was at the commit docker/pins.yaml pins (v2: and its checkout clean there, as the
    record's model_code_state says: nothing modified, deleted, untracked or hidden, the program's folder inside it),
    or run.json records it as forced; FORCED_PASSES off (v3): a run forced off the pin fails too, its figure being
    no published program's at its pin (kit bench --force is for trying a checkout, not for a result). OLDER_NAMED
    (v4): a record without model_code_state of a run that started before rule set v4 asked for it is judged as v3
    judged it (HEAD at the pin) and named in the note, its cleanliness unknown."""
    forced = {(m.get("host"), m.get("case")) for m in ev.meta.get("model_code_forced") or [] if isinstance(m, dict)}
    noted, older = 0, 0
    before_v4 = older_named and _started_before("v4", ev.meta)
    for key, _log, host, path, meta, _records in judged_records(ev, out):
        try:
            pin = pin_of(reference.BY_NAME[meta["impl"]].code)
        except RECORD_ERRORS as exc:
            out.fail(f"{key} ({host}): unknown program in the record: {exc}"[:300], ev.rel(path))
            continue
        commit, st = meta.get("model_code_commit"), meta.get("model_code_state")
        if commit != pin:
            why = f"ran model code {commit or 'of no git commit'}, docker/pins.yaml pins {pin}"
        elif not clean:
            continue
        elif not isinstance(st, dict) and before_v4:
            older += 1
            continue
        elif not isinstance(st, dict):  # a launcher before model_code_state: clean or not, nobody knows
            why = (f"recorded before launchers kept model_code_state (which rule set v4 asks for): whether the "
                   f"checkout at the pin {pin} was clean is unknown; HEAD was the pin, all that v3 asks")
        elif differs := code_state.differences(st, pin):
            why = f"model code {'; '.join(differs)} (docker/pins.yaml pins {pin})"
        else:
            continue
        if (host, key) in forced and forced_passes:
            noted += 1
            continue
        if (host, key) in forced:
            out.fail(f"{key} ({host}): {why}; it ran forced off the pin (kit bench --force, run.json "
                     "model_code_forced): its figure is not the published program's"[:600], ev.rel(path))
            continue
        out.fail(f"{key} ({host}): {why}, and run.json does not record the run as forced"[:600], ev.rel(path))
    if noted:
        out.note = f"{noted} run record(s) ran forced off the pin (run.json model_code_forced)"
    if older:
        out.note = (f"{older} run record(s) from before rule set v4 keep no model_code_state: HEAD was the pin, "
                    "whether the checkout was clean is unknown")


def _started_before(rules: str, meta: dict) -> bool:
    """The run (run.json started) began before rule set RULES entered the kit (kit.audit.rules.engine.INTRODUCED)."""
    from kit.audit.rules.engine import INTRODUCED
    from kit.core.inputs import aware_instant

    started, introduced = aware_instant(meta.get("started")), aware_instant(INTRODUCED[rules])
    return started is not None and started < introduced


@predicate()
def program_ranks_logged(ev: Evidence, out: Finding) -> None:
    """Every host that started a rank left its output; Paddle's launcher left a workerlog per rank of each host;
    one mpirun's tagged output holds every rank."""
    for key, log, host, path, meta, records in judged_records(ev, out):
        argv, folder = meta.get("argv") or [], path.parent
        gpus = int(meta.get("gpus_per_node") or 1)
        if host != "local" and not (folder / "stdout.log").is_file():
            out.fail(f"{key} ({host}): no stdout.log of this host's ranks", ev.rel(folder))
        if "paddle.distributed.launch" in argv:
            workers = {p.name for p in folder.rglob("workerlog.*") if p.is_file()}
            if len(workers) < gpus:
                out.fail(f"{key} ({host}): {len(workers)} workerlog(s) for {gpus} rank(s) on this host",
                         ev.rel(folder))
        if "-tag-output" in argv and host in ("local", records[0][0]):
            text = (folder / "stdout.log" if host != "local" else log.path).read_text(errors="replace")
            ranks = gpus * int(meta.get("nodes") or 1)
            missing = [r for r in range(ranks) if f"[1,{r}]<stdout>" not in text]
            if missing:
                out.fail(f"{key} ({host}): mpirun's output has no line of rank(s) "
                         f"{', '.join(map(str, missing[:10]))} of {ranks}", ev.rel(log.path))


def _what_the_case_says(log: RunLog, meta: dict) -> dict[str, tuple[object, str]]:
    """Each echo field's value for the log's case (its place, and its record's data mode), and how to say it."""
    g, n, gpn = log.group, log.nodes, log.gpus_per_node
    data = (meta.get("data") or {}).get("mode")
    want = {echo.BATCH: (g.batch, str(g.batch)),
            echo.NODE_BATCH: (g.batch * gpn, f"{g.batch * gpn}: {g.batch} x {gpn}"),
            echo.WORLD: (n * gpn, f"{n * gpn} GPUs"), echo.GPUS: (gpn, f"{gpn} GPUs a node"),
            echo.PRECISION: (g.precision, g.precision), echo.MODEL: (g.model, g.model)}
    if data:
        mode = "synthetic" if data == "synthetic" else "real"
        want[echo.DATA] = (mode, f"{mode} data")
    impl = reference.BY_NAME[g.framework]
    layout = ran_as(reference.RefJob(impl.framework, impl.model, g.precision, g.batch, gpn, n, data)).layout
    if layout:
        want[echo.LAYOUT] = (layout, layout)
    return want


@predicate()
def program_log_states_its_job(ev: Evidence, out: Finding) -> None:
    """What each program log says about its own job (its echo of its parameters, where its format prints one:
    kit.results.parsers.echo.ECHOES) is the job its place and command record name: batch, precision, model, world
    size or GPUs, data (synthetic or real), layout; a log of a format that echoes and says nothing fails."""
    seen: set[Path] = set()
    for key, log, _host, _path, meta, _records in judged_records(ev, out):
        if log.path in seen:  # one log per run; its hosts' records name the same job (program_as_published)
            continue
        seen.add(log.path)
        impl = reference.BY_NAME[log.group.framework]
        spec, where = echo.ECHOES.get(impl.log_format), ev.rel(log.path)
        if spec is None or spec.reads is None:
            continue
        try:
            said = spec.reads(read_log_text(log.path))
        except (ParseError, OSError) as exc:
            out.fail(f"{key}: the log cannot be read: {exc}"[:300], where)
            continue
        stated = {s.field for s in said}
        if not said and spec.required(log.nodes):
            out.fail(f"{key}: the log states nothing of its job, where {impl.title} prints {spec.states}", where)
            continue
        if said:
            for field in spec.fields:
                if field not in stated:
                    out.fail(f"{key}: the log's echo states no {field}, where {impl.title} prints {spec.states}",
                             where)
        want = _what_the_case_says(log, meta)
        for s in said:
            if s.field in want and s.value != want[s.field][0]:
                out.fail(f"{key}: {s.key} {s.raw} (the case: {want[s.field][1]})", where, s.line)
