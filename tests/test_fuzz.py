"""Fuzzing (Hypothesis) the readers of hostile input: the log parsers (`kit extract`), the config loader
(hosts.yaml through `kit bench --dry-run`, suites through `kit suites --show`) and the bundle reader
(`kit verify` on mutated bundles).

Whatever the bytes, the kit answers with a figure or a verdict (exit 0 or 1) or with one line naming the file
(exit 2): never a traceback, never an internal error (exit 3), and it writes nothing outside its output path
(none of these commands has one: the folder of the input and the working directory stay as they were, and
verify's temporary folder is gone). Seeds are real files: published logs, the kit's own log, hosts.example.yaml,
the built-in suites, and a bundle of a real run (tests/fixtures/fuzz/). Bounded: the file runs in < 60 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from kitlogs import rewrite_kitlog

from kit.audit import bundle as bd
from kit.cli.main import main
from kit.config.suites import SUITES_DIR
from kit.results.parsers import FORMATS, ParseError, parse_log

REPO = Path(__file__).resolve().parent.parent
set_hypothesis_home_dir(REPO / ".pytest_cache" / "hypothesis")  # its caches beside pytest's, not in ./.hypothesis
RUN = Path(__file__).parent / "fixtures" / "fuzz" / "fuzz-20261124-053313"
LAMBDA = Path(__file__).parent / "fixtures" / "published-logs" / "lambda" / "pytorch"
# bounded by example counts, not per-example time (shared machines are noisy); in CI the same examples every run
FUZZ = settings(deadline=None, database=None, print_blob=True, derandomize=os.environ.get("CI") == "true",
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# what an attacker types: numbers no parser expects, control and non-UTF-8 bytes, mpirun tags, structure openers
HOSTILE = [b"nan", b"-inf", b"inf", b"-1", b"0", b"-0.0", b"1e309", b"1.0e+309", b"9" * 5000, b"\x00", b"\xff\xfe",
           b"\n", b"\r", b"\r\n", b"\t", b"\x1b[2J", b"\xe2\x80\xa8", b"[1,0]<stdout>:", b"[0,0]<stderr>:",
           b":::KITLOG ", b':::KITLOG {"event": "step", "global_batch": 1e999, "seconds": 1}\n',
           b':::KITLOG {"event": "run_stop", "status": "success", "samples_per_sec": -5}\n',
           b'DLLL {"step": [], "data": {"throughput": "x"}}\n', b"[" * 3000, b"{" * 3000, b"}", b"]", b'"', b"'",
           b": ", b"- ", b"---\n", b"...\n", b"&a ", b"*a", b"<<: *a", b"? ", b"!!binary AAAA", b"%YAML 1.1\n",
           b"!!python/object/apply:os.system ['touch pwned']", b"~", b"null", b"|", b"\\", b"../../", b"/etc/passwd",
           b"ips: ", b"examples/second", b"samples/s", b"img/s", b"Epoch[0] Batch [20]\tSpeed: ",
           b"avg_ips: ", b"batch_cost: ", b"throughput_train : ", b"[", b"step: "]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

OP = st.tuples(st.sampled_from(["flip", "insert", "cut", "dup", "delete", "number"]), st.integers(0, 2**20),
               st.integers(0, 2**20), st.sampled_from(HOSTILE) | st.binary(min_size=1, max_size=8))
OPS = st.lists(OP, min_size=1, max_size=5)


def mutate(data: bytes, ops) -> bytes:
    for kind, a, b, token in ops:
        n = len(data)
        at = a % (n + 1)
        if kind == "flip" and n:
            data = data[:at % n] + bytes([data[at % n] ^ (1 + b % 255)]) + data[at % n + 1:]
        elif kind == "insert":
            data = data[:at] + token + data[at:]
        elif kind == "cut":
            data = data[:at]
        elif kind == "dup":
            end = min(n, at + 1 + b % 4096)
            data = data[:end] + data[at:end] * (1 + b % 3) + data[end:]
        elif kind == "delete":
            data = data[:at] + data[at + 1 + b % 256:]
        elif kind == "number":  # replace the a-th number: the throughput values, steps, batch sizes, ports
            found = list(NUMBER.finditer(data))
            if found:
                m = found[a % len(found)]
                data = data[:m.start()] + token + data[m.end():]
    return data


def run_kit(argv: list, cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def answered(rc: int, out: str, err: str, prefix: str, allowed: tuple[int, ...]) -> None:
    """Exit 0/1 as allowed, or 2 with exactly one line that names the file; never a traceback or a bug."""
    assert "Traceback" not in out + err and "internal error" not in err, err[-2000:]
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(prefix), err[-2000:]
    else:
        assert rc in allowed, (rc, err[-2000:])


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def fresh(scratch: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=scratch))


# --------------------------------------------------------------------------- log parsers


def _excerpt(text: str, fmt) -> bytes:
    """The head, every throughput line (the first 60) and the tail of a log, in order: small, still parseable."""
    lines = text.splitlines(keepends=True)
    keep = set(range(min(30, len(lines)))) | set(range(max(0, len(lines) - 10), len(lines)))
    keep |= {i for i, line in enumerate(lines) if fmt.needle.search(line)}
    return "".join(lines[i] for i in sorted(keep)[:120]).encode()


def _rendered_logs() -> list[str]:
    """Logs of the formats no published fixture holds, rendered by the tools' own format strings."""
    from test_parsers_more import (
        ONEFLOW_LOSS,
        basic_config,
        fleetx_fit,
        models18,
        nvlog_benchmark_run,
        plsc_v1,
        printed,
    )

    return ["\n".join(lines) + "\n" for lines in (
        [plsc_v1(0, i, 0.1, 6.9, 1000.0 + i, f"2020-01-01 00:00:0{i}") for i in range(5)],
        [fleetx_fit(0, 11 + i, 6.9 - i / 100, [0.52] * (i + 1)) for i in range(5)],
        [basic_config(models18(0, 10 * i, 6.9, 0.1, 0.2, 0.1, 0.25)) for i in range(5)],
        [printed(ONEFLOW_LOSS.format("train", 0, 20 * i, 7.0, 0.0, 0.0, 3988.89 + i), 1597933942.98 + i)
         for i in range(1, 6)],
        nvlog_benchmark_run())]


@pytest.fixture(scope="module")
def log_seeds(published, scratch) -> list[bytes]:
    """One real log per format the kit reads (published fixtures, the kit's own harness log, rendered lines)."""
    seeds: dict[str, bytes] = {}
    for i, text in enumerate(_rendered_logs()):
        (scratch / f"rendered{i}.log").write_text(text)
    candidates = sorted(p for p in published.rglob("*") if p.is_file() and p.stat().st_size < 200_000)
    candidates += sorted(LAMBDA.glob("results/H100_80GB_SXM5_v1/PyTorch_*/*.txt"))  # the formats of Lambda's logs
    for path in [*RUN.glob("logs/**/*.log"), *sorted(scratch.glob("rendered*.log")), *candidates]:
        try:
            parsed = parse_log(path)
        except ParseError:
            continue
        if parsed.format.name not in seeds:
            seeds[parsed.format.name] = _excerpt(path.read_text(errors="replace"), parsed.format)
    assert sorted(seeds) == sorted(FORMATS)
    return [seeds[name] for name in sorted(seeds)] + [b""]


@settings(FUZZ, max_examples=500)
@given(data=st.data(), ops=OPS, fmt=st.sampled_from(["auto", *FORMATS]))
def test_extract_on_mutated_logs_answers_or_names_the_file(log_seeds, scratch, data, ops, fmt):
    seed = data.draw(st.sampled_from(log_seeds) | st.binary(max_size=2048), label="seed")
    folder = fresh(scratch)
    log = folder / "run.log"
    log.write_bytes(mutate(seed, ops))
    before, cwd = snapshot(folder), fresh(scratch)
    rc, out, err = run_kit(["extract", log, "--format", fmt], cwd)
    answered(rc, out, err, f"kit: {log}", (0,))
    if rc == 0:
        value = float(out.splitlines()[-1])
        assert 0 < value < float("inf")
    assert snapshot(folder) == before and not any(cwd.iterdir())


# --------------------------------------------------------------------------- config loader

SCALARS = [b".inf", b"-.inf", b".nan", b"-1", b"0", b"1.0e+309", b"99999999999999999999", b"100000000", b"*a", b"&a x",
           b"[", b"{", b"~", b"''", b'"\\x00"', b'"\\u2028"', b"!!binary AAAA", b"!!python/object/apply:os.system [id]",
           b"../../../tmp/x", b"-oProxyCommand=touch pwned", b"$(touch pwned)", b"[" * 2000 + b"]" * 2000,
           b"{a: &a [x, x, x, x, x, x, x, x, x, x], b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], "
           b"c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}"]
VALUE = re.compile(rb"(?<=: )[^\n#,}]+|(?<=- )[^\n#,}]+")
CONFIG_OP = st.one_of(OP, st.tuples(st.just("value"), st.integers(0, 2**20), st.integers(0, 2**20),
                                    st.sampled_from(SCALARS)))


def mutate_yaml(data: bytes, ops) -> bytes:
    for op in ops:
        if op[0] == "value":  # replace the a-th scalar value of the file
            found = list(VALUE.finditer(data))
            if found:
                m = found[op[1] % len(found)]
                data = data[:m.start()] + op[3] + data[m.end():]
        else:
            data = mutate(data, [op])
    return data


SUITE_SEEDS = sorted(SUITES_DIR.glob("*.yaml")) + [RUN / "suite.yaml"]


@settings(FUZZ, max_examples=400)
@given(seed=st.sampled_from(SUITE_SEEDS), ops=st.lists(CONFIG_OP, min_size=1, max_size=4))
def test_suites_on_mutated_files_load_or_name_the_file(scratch, seed, ops):
    folder = fresh(scratch)
    path = folder / "suite.yaml"
    path.write_bytes(mutate_yaml(seed.read_bytes(), ops))
    before, cwd = snapshot(folder), fresh(scratch)
    rc, out, err = run_kit(["suites", "--show", path], cwd)
    answered(rc, out, err, f"kit: {path}", (0,))
    assert snapshot(folder) == before and not any(cwd.iterdir())


TWO_NODES = """\
schema_version: 1
name: two-nodes
hardware: gpu
cases:
  - {framework: [paddle, torch], model: resnet50, batch_size: 64, nodes: [1, 2], gpus_per_node: 8, repeats: 1}
"""


@settings(FUZZ, max_examples=250)
@given(ops=st.lists(CONFIG_OP, min_size=1, max_size=4))
def test_hosts_files_on_mutation_load_or_name_the_file(scratch, ops):
    """The inventory loaded and planned on (`kit bench --dry-run` shows each host's command of a 2-node case)."""
    folder = fresh(scratch)
    path, suite = folder / "hosts.yaml", folder / "two-nodes.yaml"
    path.write_bytes(mutate_yaml((REPO / "hosts.example.yaml").read_bytes(), ops))
    suite.write_text(TWO_NODES)
    before, cwd = snapshot(folder), fresh(scratch)
    rc, out, err = run_kit(["bench", "--suite", suite, "--dry-run", "--hosts-file", path], cwd)
    answered(rc, out, err, f"kit: {path}", (0,))
    assert snapshot(folder) == before and not any(cwd.iterdir())


# --------------------------------------------------------------------------- bundle reader


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory) -> tuple[Path, Path]:
    """A bundle of the real run (tests/fixtures/fuzz/) and its unpacked tree, both pristine."""
    base = tmp_path_factory.mktemp("bundle")
    run = base / "runs" / RUN.name
    shutil.copytree(RUN, run)
    bundle = bd.make_bundle(run, base / "real.bundle.tar.gz", submitter="Lab", system_name="box")
    rc, out, err = run_kit(["verify", bundle], base)
    assert rc == 0 and "CONSISTENT, authenticity NOT checked" in out, out + err
    return bundle, bd.unpack(bundle, base / "open")


@contextlib.contextmanager
def temp_dir_checked(scratch: Path):
    """tempfile's folder pointed at an empty one that must be empty again afterwards."""
    tmp, old = fresh(scratch), tempfile.tempdir
    tempfile.tempdir = str(tmp)
    try:
        yield
    finally:
        tempfile.tempdir = old
    assert not any(tmp.iterdir()), list(tmp.iterdir())


@settings(FUZZ, max_examples=60)
@given(ops=OPS)
def test_verify_on_mutated_archives_gives_a_verdict(real_bundle, scratch, ops):
    folder = fresh(scratch)
    bundle = folder / "b.tar.gz"
    bundle.write_bytes(mutate(real_bundle[0].read_bytes(), ops))
    before, cwd = snapshot(folder), fresh(scratch)
    with temp_dir_checked(scratch):
        rc, out, err = run_kit(["verify", bundle], cwd)
    answered(rc, out, err, f"kit verify: {bundle}", (0, 1))
    assert snapshot(folder) == before and not any(cwd.iterdir())


def _json_paths(node, path=()):
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _json_paths(value, (*path, key))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=8)
RAW_JSON = [b"1" * 5000, b"[" * 100000 + b"]" * 100000, b"NaN", b"-Infinity", b"1e999", b'"../../../etc/passwd"',
            b'"/etc/passwd"', b'"v1/../v1"', b'"\\u0000"']


def poke_json(data: bytes, where: int, value) -> bytes:
    """The where-th value of a JSON document replaced (a hostile JSON value or raw text)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    paths = list(_json_paths(doc))
    path = paths[where % len(paths)]
    if not path:
        return value if isinstance(value, bytes) else json.dumps(value).encode()
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = "\x01POKE\x01"
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return json.dumps(doc).encode().replace(b'"\\u0001POKE\\u0001"', raw, 1)


@settings(FUZZ, max_examples=200)
@given(data=st.data(), rebuild=st.booleans(), as_archive=st.booleans())
def test_verify_on_mutated_bundle_contents_gives_a_verdict(real_bundle, scratch, data, rebuild, as_archive):
    """One file of the bundle changed (bytes, a JSON value, gone, a folder, a FIFO), the manifest rebuilt over it
    or not (a forger's bundle, unsigned), verified as a folder or as a .tar.gz."""
    folder = fresh(scratch)
    root = folder / real_bundle[1].name
    shutil.copytree(real_bundle[1], root)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    target = root / data.draw(st.sampled_from(files), label="file")
    how = data.draw(st.sampled_from(["bytes", "json", "json", "remove", "folder", "fifo"]), label="how")
    if how == "bytes":
        target.write_bytes(mutate(target.read_bytes(), data.draw(OPS, label="ops")))
    elif how == "json":
        value = data.draw(JSON_VALUES | st.sampled_from(RAW_JSON), label="value")
        target.write_bytes(poke_json(target.read_bytes(), data.draw(st.integers(0, 2**16), label="where"), value))
    elif how == "remove":
        target.unlink()
    elif how == "folder":
        target.unlink()
        target.mkdir()
    elif not as_archive:  # a FIFO where a file was: reading it would hang
        target.unlink()
        os.mkfifo(target)
    if rebuild and target.name != bd.MANIFEST and not (target.is_dir() or how == "fifo"):
        bd.write_manifest(root)
    subject = root
    if as_archive:
        subject = folder / "b.tar.gz"
        with tarfile.open(subject, "w:gz") as tar:
            tar.add(root, arcname=root.name)
        shutil.rmtree(root)
    before, cwd = snapshot(folder), fresh(scratch)
    with temp_dir_checked(scratch):
        rc, out, err = run_kit(["verify", subject], cwd)
    answered(rc, out, err, f"kit verify: {subject}", (0, 1))
    assert snapshot(folder) == before and not any(cwd.iterdir())


def _start(**fields):
    return lambda d: {**d, **fields} if d["event"] == "run_start" else d


def _faster(d):
    if d["event"] == "step":
        return {**d, "seconds": d["seconds"] * 0.45, "samples_per_sec": d["samples_per_sec"] / 0.45}
    return d


CONSISTENT_FORGERIES = {  # each is a log that disagrees with the case it is filed under, or a repeat that is not one
    "framework": _start(framework="paddle"), "model": _start(model="vgg16"), "batch": _start(local_batch=16),
    "image size": _start(image_size=64), "precision": _start(precision="amp"), "ranks": _start(ranks=2),
    "layout": _start(layout="nhwc", channels_last=True), "mode": _start(mode="compiled"),
    "halved seconds": _faster, "copy as repeat 2": "copy", "extra repeat 3": "extra",
}


@pytest.mark.parametrize("forgery", sorted(CONSISTENT_FORGERIES))
def test_consistently_forged_bundles_never_verify(tmp_path, forgery):
    """Mutated *consistently*: the report and results rebuilt from the forged logs, the manifest rebuilt by
    kit bundle; verify must still say NOT OK, naming a rule."""
    from kit.audit.verify import verify
    from kit.config.suites import load_suite
    from kit.run import bench

    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    case = run / "logs/torch/resnet50/bz2/1n1g"
    edit = CONSISTENT_FORGERIES[forgery]
    if edit == "copy":
        (case / "resnet50_b2_fp32_2.log").write_bytes((case / "resnet50_b2_fp32_1.log").read_bytes())
    elif edit == "extra":
        shutil.copy(case / "resnet50_b2_fp32_1.log", case / "resnet50_b2_fp32_3.log")
    else:
        rewrite_kitlog(case / "resnet50_b2_fp32_1.log", edit)
    bench.write_report(run, load_suite(run / "suite.yaml"))
    result = verify(bd.make_bundle(run, tmp_path / "b.tar.gz", submitter="Lab", system_name="box"))
    assert not result.ok and result.violations, forgery
    assert {v.rule for v in result.violations} & {"log_states_its_case", "only_declared_repeats", "every_log_read",
                                                   "steps_agree_with_their_clock", "every_rank_logged"}, \
        (forgery, result.violations)


# ---- the closed world, field by field: every field of a harness record, forged consistently ------------------------

GOLDEN = Path(__file__).parent / "fixtures" / "golden-bundles" / "cpu-loader"  # a real CPU run on ImageNet JPEGs
# fields whose forgery changes neither the work nor the figure, so verify rightly lets it pass (the closing note of
# issue 39 lists them): the software's own versions and the run's choices that do not change what a step does
NOT_THE_WORK = {
    "run_start": {"kit", "framework_version", "python", "compiler", "cuda_version", "cudnn_version", "seed", "lr",
                  "momentum", "weight_decay", "workers", "threads", "decoder", "decode_device", "device_count"},
    "step": {"kit", "loss"},
}
SAME_IN_REPEATS_ONLY = {"params"}  # describes the model the case names: checked across the case's repeats


def _golden_log() -> Path:
    return next((GOLDEN / "run").glob("*/logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"))


def _records(event: str) -> dict:
    lines = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in _golden_log().read_text().splitlines()
             if ":::KITLOG " in line]
    return next(d for d in lines if d["event"] == event)


def _other(value):
    """A plausible other value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 3_600_000 if value > 10**12 else (value * 2 if value else 1)
    if isinstance(value, float):
        return value * 1.5 if value else 0.5
    if isinstance(value, str):
        return {"torch": "paddle", "fp32": "amp", "nchw": "nhwc", "eager": "compiled", "cpu": "gpu"}.get(value,
                                                                                                     value + "x")
    if isinstance(value, dict):
        return {**value, **{k: _other(v) for k, v in list(value.items())[:1]}}
    return 1 if value is None else []


FIELDS = [(event, key) for event in ("run_start", "step") for key in sorted(_records(event))
          if key != "event" and key not in NOT_THE_WORK[event] | SAME_IN_REPEATS_ONLY]


@pytest.mark.parametrize(("event", "key"), FIELDS, ids=[f"{e}.{k}" for e, k in FIELDS])
def test_every_field_that_is_the_work_is_checked(tmp_path, event, key):
    """Each field of run_start and of the step records that names the work or times it, forged in repeat 1 (every
    step alike) with the report and results written again to agree: rule set v4 refuses the bundle."""
    from kit.audit.verify import verify_tree
    from kit.config.suites import load_suite
    from kit.run import bench

    root = tmp_path / GOLDEN.name
    shutil.copytree(GOLDEN, root)
    run = next((root / "run").iterdir())
    log = run / _golden_log().relative_to(next((GOLDEN / "run").iterdir()))
    rewrite_kitlog(log, lambda d: {**d, key: _other(d[key])} if d.get("event") == event and key in d else d)
    bench.write_report(run, load_suite(run / "suite.yaml"))
    bd.write_manifest(root)
    result = verify_tree(root)
    assert result.violations, f"{event}.{key} forged to {_other(_records(event)[key])!r} verifies"


def test_a_repeat_stating_another_model_size_than_its_sibling_is_refused(tmp_path):
    """params (and the other SAME_IN_REPEATS fields of kit/audit/rules/closed.py) must agree across a case's repeats:
    a second repeat (the first, moved an hour on) that states other params is named."""
    from kit.audit.verify import verify_tree
    from kit.config.suites import load_suite
    from kit.run import bench

    root = tmp_path / GOLDEN.name
    shutil.copytree(GOLDEN, root)
    run = next((root / "run").iterdir())
    first = run / _golden_log().relative_to(next((GOLDEN / "run").iterdir()))
    second = first.with_name(first.name.replace("_1.log", "_2.log"))
    second.write_text(first.read_text())
    rewrite_kitlog(second, lambda d: {**d, "time_ms": d["time_ms"] + 3_600_000} | (
        {"params": d["params"] // 2} if d.get("event") == "run_start" else {}) if "time_ms" in d else d)
    bench.write_report(run, load_suite(run / "suite.yaml"))
    bd.write_manifest(root)
    said = [v.message for v in verify_tree(root).violations if v.rule == "log_is_the_harness_own"]
    assert any("params 11764261 where logs/" in m for m in said), said
