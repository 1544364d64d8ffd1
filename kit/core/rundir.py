"""A run directory's records, each with one reader (and writer) every layer uses: run.json, results.json and the
published programs' command records (<log stem>.cmd.json). The audit's evidence aside: it judges a bundle's copies
rule by rule, whatever shape a hostile one has.

    meta = read_run_meta(run_dir)                 # its object; InputError naming file and key when it is not one
    meta = read_run_meta(run_dir, missing_ok=True)  # {} where the directory has none
    save_run_meta(run_dir, meta)                  # atomic, schema_version stamped (kit.core.files)
    runs = run_entries(meta)                      # {log: entry} of the runs it records, each an object
    results = read_results(run_dir)               # results.json (kit report writes it: kit.results.exporters)
    record = read_sidecar(log)                    # the command record beside a program's log; InputError
    for path, record in sidecars(run_dir): ...    # every readable command record under logs/ and hosts/

The keys other modules index into are checked for their kind when read, so a reader never meets a list where it
expects an object: `runs` (an object of objects), `planned_runs`, `skipped_cases` (lists of objects), `hosts` (a
list), `expanded_suite` (an object).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from kit.core.filecache import once
from kit.core.files import write_json, write_text
from kit.core.inputs import InputError, parse_json, read_json_object
from kit.core.layout import SIDECAR_SUFFIX, sidecar_name

RUN_JSON = "run.json"
RESULTS_JSON = "results.json"
CAPTURE_JSON = "capture.json"  # env/<host>/: check-env's record of the host
YARDSTICK_JSON = "yardstick.json"  # env/<host>/: kit yardstick on the host before a GPU suite's runs
_OBJECT, _LIST = (dict, "an object"), (list, "a list")
SHAPES = {"runs": _OBJECT, "planned_runs": _LIST, "skipped_cases": _LIST, "hosts": _LIST,
          "expanded_suite": _OBJECT}
ITEMS = {"runs": _OBJECT, "planned_runs": _OBJECT, "skipped_cases": _OBJECT}  # what each holds


def run_meta_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / RUN_JSON


def has_run_meta(run_dir: Path | str) -> bool:
    return run_meta_path(run_dir).is_file()


def read_run_meta(run_dir: Path | str, missing_ok: bool = False) -> dict:
    """run.json of `run_dir`, its shape checked (SHAPES, ITEMS); {} when absent and `missing_ok`."""
    path = run_meta_path(run_dir)
    if missing_ok and not path.exists():
        return {}
    meta = read_json_object(path, RUN_JSON)
    for key, (kind, said) in SHAPES.items():
        value = meta.get(key)
        if value is not None and not isinstance(value, kind):
            raise InputError(path, f"expected {said}, found {type(value).__name__}", key=key)
        item_kind, item_said = ITEMS.get(key, (None, ""))
        if item_kind is not None and value:
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for name, item in items:
                if not isinstance(item, item_kind):
                    raise InputError(path, f"expected {item_said}, found {type(item).__name__}", key=f"{key}.{name}")
    return meta


def save_run_meta(run_dir: Path | str, meta: dict) -> Path:
    return write_json(run_meta_path(run_dir), meta, RUN_JSON)


def run_entries(meta: dict) -> dict[str, dict]:
    """The runs run.json records, by log path (read_run_meta checked each is an object)."""
    return meta.get("runs") or {}


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
    """The command record beside a published program's log (scripts/reference/launch.py); InputError naming it."""
    log = Path(log)
    path = log if log.name.endswith(SIDECAR_SUFFIX) else log.with_name(sidecar_name(log.name))
    return once("command record", path, lambda: read_json_object(path, "command record"))


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
    """check-env's record of one host (<env>/<host>/capture.json), atomic."""
    return write_text(Path(host_dir) / CAPTURE_JSON, json.dumps(capture, indent=2) + "\n")


def save_host_yardstick(host_dir: Path | str, result: dict) -> Path:
    """The hardware yardstick's result for one host of a run (<run>/env/<host>/yardstick.json), atomic."""
    return write_text(Path(host_dir) / YARDSTICK_JSON, json.dumps(result, indent=1) + "\n")


def host_yardsticks(run_dir: Path | str) -> dict[str, Path]:
    """{host: its yardstick.json} of a run, in host order (the reader checks each: kit.results.yardstick)."""
    return {p.parent.name: p for p in sorted((Path(run_dir) / "env").glob(f"*/{YARDSTICK_JSON}")) if p.is_file()}


def host_captures(run_dir: Path) -> dict[str, dict]:
    """{host: its capture} of a run (env/<host>/capture.json: check-env's record of its hardware), in host order;
    one that does not read as a JSON object is left out (kit verify names it: environment_consistent)."""
    return env_captures(Path(run_dir) / "env")


def env_captures(env_dir: Path) -> dict[str, dict]:
    """{host: its capture} of a check-env folder (<host>/capture.json), as host_captures reads a run's."""
    out = {}
    for path in sorted(Path(env_dir).glob(f"*/{CAPTURE_JSON}")):
        try:
            data = once("capture", path, lambda path=path: parse_json(path.read_bytes()))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[path.parent.name] = data
    return out
