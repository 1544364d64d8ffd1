"""A run directory's records, each with one reader (and writer) every layer uses: run.json, results.json, the
published programs' command records (<log stem>.cmd.json) and the hosts' captures. The audit's evidence aside: it
judges a bundle's copies rule by rule, whatever shape a hostile one has.

    run = read_run(run_dir)                       # run.json as a RunRecord: typed, migrated, checked
    run.runs[log].figure, run.runs[log].unit      # each run's figure and what it counts (images/s, tokens/s, ...)
    meta = read_run_meta(run_dir)                 # the same record as its dict (what a writer changes and saves)
    meta = read_run_meta(run_dir, missing_ok=True)  # {} where the directory has none
    save_run_meta(run_dir, meta)                  # checked, atomic, schema_version stamped (kit.core.files)
    results = read_results(run_dir)               # results.json (kit report writes it: kit.results.exporters)
    record = read_sidecar(log)                    # the command record beside a program's log; InputError
    for path, record in sidecars(run_dir): ...    # every readable command record under logs/ and hosts/
    sweep = read_sweep(sweep_dir)                 # a sweep's sweep.json: its hosts, how each row ended
    sweep_parts(sweep_dir)                        # {row: its run directory}: 'h1': hosts/h1/, 'h1/gpu3': hosts/h1/gpu3/
    capture_gpus(capture)                         # the GPUs a host's capture lists, nvidia-smi's order

run.json is read in its schema version's shape and brought to this kit's (RUN_MIGRATIONS, one step per version:
1 -> 2 names each run's figure `figure`, where version 1 said `samples_per_sec` whatever it counted). Every key
RUN_SHAPE declares is checked for its kind when read and before it is written: a malformed one is one InputError
naming the file and the key (`runs.<log>.repeat: expected an integer, found a string`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kit.core.filecache import once
from kit.core.files import SCHEMA_VERSIONS, stamped, write_json, write_text
from kit.core.inputs import InputError, parse_json, read_json_object
from kit.core.layout import SIDECAR_SUFFIX, sidecar_name
from kit.core.schema import INT, NUMBER, OBJECT, STR, Map, Obj, Opt, Seq, check, migrated

RUN_JSON = "run.json"
SWEEP_JSON = "sweep.json"  # a sweep's record: its hosts (or Slurm nodes) and how each ended (kit.run.sweep)
RESULTS_JSON = "results.json"
CAPTURE_JSON = "capture.json"  # env/<host>/: check-env's record of the host
YARDSTICK_JSON = "yardstick.json"  # env/<host>/: kit yardstick on the host before a GPU suite's runs
RUN_ENTRY_SHAPE = Obj({
    "case": STR, "repeat": INT, "status": STR, "figure": Opt(NUMBER), "unit": Opt(STR), "wall_seconds": NUMBER,
    "reason": Opt(STR), "host_load": Opt(OBJECT), "ran": Opt(OBJECT), "telemetry": Opt(OBJECT),
    "telemetry_error": STR, "command": STR, "argv": Seq(STR), "env": OBJECT, "hosts": Map(OBJECT),
    "slurm": OBJECT, "precision": Opt(STR), "layout": Opt(STR), "mode": Opt(STR), "loader": Opt(STR)})
RUN_SHAPE = Obj({
    "schema_version": INT, "kit_version": STR, "rules_version": STR, "suite": STR, "suite_sha256": STR,
    "kit_commit": OBJECT, "harness_sha256": OBJECT, "started": STR, "finished": STR, "host": OBJECT,
    "hosts": Seq(STR), "inherited_environment": OBJECT,
    "runs": Map(RUN_ENTRY_SHAPE),
    "planned_runs": Seq(Obj({"case": STR, "repeat": INT, "log": STR})),
    "skipped_cases": Seq(Obj({"case": STR, "reason": STR})),
    "warnings": Seq(STR), "model_code_forced": Seq(OBJECT), "expanded_suite": OBJECT, "gpu_telemetry": OBJECT,
    "time_limits": OBJECT, "env_error": STR, "yardstick_error": STR})


COMMAND_SHAPE = Obj({  # <log stem>.cmd.json: kit.config.reference.record, completed by scripts/reference/launch.py
    "schema_version": INT, "impl": STR, "framework": STR, "model": STR, "precision": STR, "batch_size": INT,
    "nodes": INT, "gpus_per_node": INT, "rank": INT, "argv": Seq(STR), "env": OBJECT, "command": STR,
    "log_format": STR, "kit_method": OBJECT, "publisher_method": Opt(OBJECT), "data": OBJECT, "cluster": OBJECT,
    "started": STR, "host": STR, "model_code_commit": Opt(STR), "model_code_state": OBJECT, "environ": OBJECT,
    "placeholders": Seq(OBJECT), "scratch": OBJECT, "outputs": Seq(STR), "exit_code": Opt(INT)})


CAPTURE_SHAPE = Obj({  # env/<host>/capture.json: kit.hosts.capture.model.HostCapture.to_dict
    "host": STR, "smi": Opt(Obj({"gpus": Seq(OBJECT)})), "topology": Opt(OBJECT), "cpu": OBJECT,
    "memory_bytes": INT, "os_release": STR, "kernel": STR, "docker_version": Opt(STR), "ib_devices": Seq(STR),
    "nic": Opt(STR), "cpu_quota": Opt(Obj({"cores": NUMBER, "file": STR})), "cpus_allowed": Opt(INT)})


def _figure_named_figure(meta: dict) -> dict:
    """run.json 1 -> 2: a run's figure is `figure` (version 1: `samples_per_sec`, also where it counted tokens)."""
    runs = meta.get("runs")
    if not isinstance(runs, dict):
        return dict(meta)
    renamed = {log: {("figure" if k == "samples_per_sec" else k): v for k, v in entry.items()}
               if isinstance(entry, dict) else entry for log, entry in runs.items()}
    return {**meta, "runs": renamed}


RUN_MIGRATIONS = {1: _figure_named_figure}


def run_meta_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / RUN_JSON


def has_run_meta(run_dir: Path | str) -> bool:
    return run_meta_path(run_dir).is_file()


def read_run_meta(run_dir: Path | str, missing_ok: bool = False) -> dict:
    """run.json of `run_dir` in this kit's schema version (RUN_MIGRATIONS), its shape checked (RUN_SHAPE); {} when
    absent and `missing_ok`."""
    path = run_meta_path(run_dir)
    if missing_ok and not path.exists():
        return {}
    meta = migrated(read_json_object(path, RUN_JSON), RUN_MIGRATIONS, SCHEMA_VERSIONS[RUN_JSON], path)
    check(meta, RUN_SHAPE, path)
    return meta


@dataclass(frozen=True)
class RunEntry:
    """One run as run.json records it (RUN_ENTRY_SHAPE; `fields`: the whole entry as written)."""
    log: str
    fields: dict

    case = property(lambda self: self.fields.get("case"))
    repeat = property(lambda self: self.fields.get("repeat"))
    status = property(lambda self: self.fields.get("status"))
    figure = property(lambda self: self.fields.get("figure"))
    unit = property(lambda self: self.fields.get("unit"))
    wall_seconds = property(lambda self: self.fields.get("wall_seconds"))
    reason = property(lambda self: self.fields.get("reason"))
    host_load = property(lambda self: self.fields.get("host_load"))
    ran = property(lambda self: self.fields.get("ran"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def name(self) -> str:
        """'<case> #<repeat>', or its log where it names no case."""
        return f"{self.case} #{self.repeat}" if self.case else self.log


@dataclass(frozen=True)
class PlannedEntry:
    case: str
    repeat: int
    log: str


@dataclass(frozen=True)
class RunRecord:
    """run.json as read (read_run): migrated to this kit's schema version and checked, so each field has its kind."""
    path: Path | None
    fields: dict

    kit_version = property(lambda self: self.fields.get("kit_version"))
    rules_version = property(lambda self: self.fields.get("rules_version"))
    started = property(lambda self: self.fields.get("started"))
    finished = property(lambda self: self.fields.get("finished"))
    host = property(lambda self: self.fields.get("host") or {})
    hosts = property(lambda self: self.fields.get("hosts") or [])
    warnings = property(lambda self: self.fields.get("warnings") or [])
    model_code_forced = property(lambda self: self.fields.get("model_code_forced") or [])
    harness_sha256 = property(lambda self: self.fields.get("harness_sha256") or {})  # {file: sha256} as it ran
    kit_commit = property(lambda self: self.fields.get("kit_commit") or {})  # kit.core.revision.source_revision
    inherited_environment = property(lambda self: self.fields.get("inherited_environment") or {})

    @property
    def exists(self) -> bool:
        return bool(self.fields)

    @property
    def runs(self) -> dict[str, RunEntry]:
        return {log: RunEntry(log, entry) for log, entry in (self.fields.get("runs") or {}).items()}

    @property
    def planned(self) -> list[PlannedEntry] | None:
        """The runs kit bench planned; None where run.json records no plan (older runs)."""
        planned = self.fields.get("planned_runs")
        return None if planned is None else [
            PlannedEntry(str(p.get("case")), p["repeat"], str(p.get("log"))) for p in planned if "repeat" in p]

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return [(s.get("case", ""), s.get("reason", "")) for s in self.fields.get("skipped_cases") or []]


def read_run(run_dir: Path | str, missing_ok: bool = False) -> RunRecord:
    """run.json of `run_dir` as a RunRecord (read_run_meta's checks); an empty one when absent and `missing_ok`."""
    path = run_meta_path(run_dir)
    return RunRecord(path, read_run_meta(run_dir, missing_ok))


def save_run_meta(run_dir: Path | str, meta: dict) -> Path:
    """run.json written atomically, after the same check a reader makes (a writer's slip fails here, not later)."""
    path = run_meta_path(run_dir)
    check(stamped(RUN_JSON, meta), RUN_SHAPE, path)
    return write_json(path, meta, RUN_JSON)


SWEEP_SHAPE = Obj({"schema_version": INT, "suite": STR, "hosts": Seq(STR), "scheduler": STR, "started": STR,
                   "finished": STR, "rows": Map(Obj({"status": STR, "reason": STR, "seconds": NUMBER}))})


def is_sweep(run_dir: Path | str) -> bool:
    return (Path(run_dir) / SWEEP_JSON).is_file()


def read_sweep(run_dir: Path | str) -> dict:
    """sweep.json of a sweep's directory, its shape checked (SWEEP_SHAPE)."""
    path = Path(run_dir) / SWEEP_JSON
    record = read_json_object(path, SWEEP_JSON)
    check(record, SWEEP_SHAPE, path)
    return record


def save_sweep(run_dir: Path | str, record: dict) -> Path:
    path = Path(run_dir) / SWEEP_JSON
    check(stamped(SWEEP_JSON, record), SWEEP_SHAPE, path)
    return write_json(path, record, SWEEP_JSON)


def sweep_host_dir(run_dir: Path | str, host: str) -> Path:
    """One host's run directory inside a sweep's: <sweep>/hosts/<host>/ (run.json, logs/, report.md as kit
    multinode leaves them)."""
    return Path(run_dir) / "hosts" / host


SLICE = re.compile(r"gpu(\d+)")  # <sweep>/hosts/<host>/gpu<i>/: one GPU's run directory (kit.run.sweep)


def slice_name(host: str, gpu: int) -> str:
    """A GPU's row of a sweep: '<host>/gpu<i>', also its run directory's place under <sweep>/hosts/."""
    return f"{host}/gpu{gpu}"


def sweep_slice_dir(run_dir: Path | str, host: str, gpu: int) -> Path:
    """The run directory of one GPU of a host in a sweep (its 1-GPU cases pinned to that GPU): <sweep>/hosts/<host>/
    gpu<i>/, a run directory as kit multinode leaves one."""
    return sweep_host_dir(run_dir, host) / f"gpu{gpu}"


def sweep_slices(run_dir: Path | str, host: str) -> dict[int, Path]:
    """{GPU index: its run directory} of a host of a sweep, in GPU order; {} where its runs were not per GPU."""
    found = {int(m.group(1)): p for p in sweep_host_dir(run_dir, host).glob("gpu*")
             if p.is_dir() and (m := SLICE.fullmatch(p.name))}
    return dict(sorted(found.items()))


def sweep_parts(run_dir: Path | str) -> dict[str, Path]:
    """{row: its run directory} of a sweep, in sweep.json's host order: each host's GPUs ('h1/gpu3', from
    sweep_slices), and the host itself ('h1') where it has runs of its own or no GPU's."""
    parts = {}
    for host in read_sweep(run_dir)["hosts"]:
        slices = sweep_slices(run_dir, host)
        if has_run_meta(sweep_host_dir(run_dir, host)) or not slices:
            parts[host] = sweep_host_dir(run_dir, host)
        parts.update({slice_name(host, gpu): path for gpu, path in slices.items()})
    return parts


def remote_run_id(run_dir: Path | str) -> str:
    """The run's name on its hosts (<work_dir>/runs/<it>/<host>/...): its directory's, or for one host's part of a
    sweep, the sweep's; for one GPU's part '<sweep>-gpu<i>', so that the GPUs of a host never share a folder, a
    container name or a stop."""
    run_dir = Path(run_dir)
    if run_dir.parent.name == "hosts" and is_sweep(run_dir.parent.parent):
        return run_dir.parent.parent.name
    sweep = run_dir.parent.parent.parent
    if SLICE.fullmatch(run_dir.name) and run_dir.parent.parent.name == "hosts" and is_sweep(sweep):
        return f"{sweep.name}-{run_dir.name}"
    return run_dir.name


def results_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / RESULTS_JSON


def has_results(run_dir: Path | str) -> bool:
    return results_path(run_dir).is_file()


def read_results(where: Path | str) -> dict:
    """results.json of a run directory (or that file itself, named): the report's figures as written; InputError
    naming it when it is no JSON object."""
    where = Path(where)
    return read_json_object(where if where.is_file() else results_path(where), RESULTS_JSON)


def read_sidecar(log: Path | str) -> dict:
    """The command record beside a published program's log (scripts/reference/launch.py), its shape checked
    (COMMAND_SHAPE); InputError naming it (and the key)."""
    log = Path(log)
    path = log if log.name.endswith(SIDECAR_SUFFIX) else log.with_name(sidecar_name(log.name))
    return once("command record", path, lambda: _checked_command(path))


def _checked_command(path: Path) -> dict:
    record = read_json_object(path, "command record")
    check(record, COMMAND_SHAPE, path)
    return record


def sidecars(run_dir: Path | str, tops: tuple[str, ...] = ("logs", "hosts")) -> Iterator[tuple[Path, dict]]:
    """(path, record) of every command record under the run's `tops`, in path order; one that does not read as a
    JSON object is left out (a report section shows what the others say)."""
    for path in sorted(p for top in tops for p in (Path(run_dir) / top).rglob("*" + SIDECAR_SUFFIX)):
        try:
            yield path, read_sidecar(path)
        except InputError:
            continue


def capture_path(env_dir: Path | str, host: str) -> Path:
    """Where check-env writes HOST's capture under ENV_DIR (a run's env/, or a check-env folder)."""
    return Path(env_dir) / host / CAPTURE_JSON


def save_capture(host_dir: Path | str, capture: dict) -> Path:
    """check-env's record of one host (<env>/<host>/capture.json), atomic, its shape checked (CAPTURE_SHAPE)."""
    check(capture, CAPTURE_SHAPE, Path(host_dir) / CAPTURE_JSON)
    return write_text(Path(host_dir) / CAPTURE_JSON, json.dumps(capture, indent=2) + "\n")


def save_host_yardstick(host_dir: Path | str, result: dict) -> Path:
    """The hardware yardstick's result for one host of a run (<run>/env/<host>/yardstick.json), atomic."""
    return write_text(Path(host_dir) / YARDSTICK_JSON, json.dumps(result, indent=1) + "\n")


def host_yardsticks(run_dir: Path | str) -> dict[str, Path]:
    """{host: its yardstick.json} of a run, in host order (the reader checks each: kit.results.yardstick)."""
    return {p.parent.name: p for p in sorted((Path(run_dir) / "env").glob(f"*/{YARDSTICK_JSON}")) if p.is_file()}


def capture_gpus(capture: dict | None) -> list[dict]:
    """The GPUs a capture lists (smi.gpus, nvidia-smi's order: by PCI bus id), [] for a host without any."""
    gpus = ((capture or {}).get("smi") or {}).get("gpus") or []
    return [g for g in gpus if isinstance(g, dict)]


def host_captures(run_dir: Path) -> dict[str, dict]:
    """{host: its capture} of a run (env/<host>/capture.json: check-env's record of its hardware), in host order;
    one that does not read as a JSON object of CAPTURE_SHAPE is left out (kit verify names it:
    environment_consistent)."""
    return env_captures(Path(run_dir) / "env")


def env_captures(env_dir: Path) -> dict[str, dict]:
    """{host: its capture} of a check-env folder (<host>/capture.json), as host_captures reads a run's."""
    out = {}
    for path in sorted(Path(env_dir).glob(f"*/{CAPTURE_JSON}")):
        try:
            data = once("capture", path, lambda path=path: parse_json(path.read_bytes()))
            check(data, CAPTURE_SHAPE, path)
        except (OSError, ValueError, InputError):
            continue
        out[path.parent.name] = data
    return out
