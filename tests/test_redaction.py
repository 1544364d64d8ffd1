"""Redaction's shortcuts (kit.audit.redact: needle lines, gates, case-sensitive search of lowered text) skip only
text no pattern can match: redact_text finds exactly what every pattern finds on every line. And the streamed
bundle (kit.audit.bundle: no copy of the run on disk) lists exactly the bytes it packs. And redaction never changes
what the parsers read (issue 31): every fixture log, every format of a generated run and a log of mlcommons' own
logger parse the same before and after, while secrets beside the same words are still redacted."""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import sys
import tarfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.audit import bundle as bd
from kit.audit import prefilter
from kit.audit import redact as rd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import pytest  # noqa: E402
import scale  # noqa: E402

CHECK = settings(deadline=None, database=None, max_examples=300, derandomize=os.environ.get("CI") == "true",
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def slow_redact(text: str) -> tuple[str, list[tuple[int, str]]]:
    """What redaction means, without shortcuts: every pattern on every line, then private-key blocks."""
    found: list[tuple[int, str]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        lines[number], keys = rd.redact_line(line, list(enumerate(rd.PATTERNS)))
        found += [(number + 1, key) for key in keys]

    def pem(m: re.Match) -> str:
        found.append((m.string.count("\n", 0, m.start()) + 1, "private key block"))
        return rd.REDACTED

    return rd.PEM_BLOCK.sub(pem, "\n".join(lines)), sorted(found)


# pieces of secrets (each pattern's kind), their keywords alone, and what logs hold around them
PIECES = [
    "HF_TOKEN=hf_AbCdEf123", '"tokens": 4096', "max_tokens=5120", '"token": 123456', "WANDB_API_KEY: abc",
    "password: 'S3cr3t!'", "DB_PASS=dbpass-4a7e19", "Authorization: Bearer tok-8f3a91", "bearer abc.def",
    "mysql -h db -u x -pMyS3cret", "mariadb -pPw", "AKIAIOSFODNN7EXAMPLE", "aws_secret_key = '" + "A" * 40 + "'",
    "ghp_" + "Ab12" * 9, "glpat-" + "x" * 20, "xoxb-123456789012-abc", "https://alice:Pa55@registry.example.com",
    "ibm_cloud_iam_key = " + "a" * 44, "iam_api_key: " + "B-" * 22, "cloudant_password: " + "0f" * 32,
    "cl_pw=" + "q" * 24, "softlayer_api_key " + "9z" * 32, "https://api.softlayer.com/soap/v3/" + "a1" * 32,
    "cos_hmac_secret_access_key = " + "ab" * 24, "123456789:" + "A" * 35, "M" + "a" * 23 + "." + "b" * 6 + "." +
    "c" * 27, "sk_live_" + "Z" * 24, "AccountKey=" + "k" * 88, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "https://hooks.slack.com/services/T000/B000/XXXX", "0123456789abcdef0123456789abcdef-us12", "AKC" + "a" * 10,
    "AP6" + "b" * 8, "//registry.npmjs.org/:_authToken=npm_" + "x" * 36, "sq0csp-" + "s" * 43, "SG." + "g" * 22 +
    "." + "h" * 43, "pypi-AgEIcHlwaS5vcmc" + "p" * 70, "AC" + "0" * 32, "SK" + "1" * 32,
    "api_key == 'v4lue'", "secret = \"abc\";", "\"contraseña\": \"x1\"", "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----", "key", "pass", "Pass:0 batch:10", "pwd", "token", "secret", "auth", "cl", "sl",
    "PWD", "fuse_pass_base", ":::KITLOG {\"event\": \"step\", \"tokens\": 8192}",
    "\"key\": \"tracked_stats\"", "'key': 'x'", "\"tokens\": 4096.5", "tokens=-1e5", "cache_key=abc", "sort_keys: [1",
    "'pad_token': '<pad>'", "max_token=5120", "SECRET_TOKENS=12ab", "\"key\"", "_key", "nan", ".5", "[4096]",
    ":::MLLOG {\"key\": \"x\"}", ":::KITLOG ",
]
FILLER = [" ", "  ", "\n", "\n\n", "=", ": ", ":", "\"", "'", ";", ",", "}", "[", "]", "-", "_", ".", "/", "@",
          "\t", "\r\n", "x", "Z9", "\u212a", "\u017f", "\u0130", "ñ", "é", "\u2028"]


def cased(piece: str, how: int) -> str:
    return [piece, piece.upper(), piece.lower(), piece.swapcase()][how]


TEXTS = st.lists(st.one_of(st.tuples(st.sampled_from(PIECES), st.integers(0, 3)).map(lambda t: cased(*t)),
                           st.sampled_from(FILLER), st.text(string.ascii_letters + string.digits + " _-:=\n",
                                                            max_size=12)),
                 max_size=40).map("".join)


@CHECK
@given(TEXTS)
def test_redaction_finds_what_every_pattern_finds_on_every_line(text):
    assert rd.redact_text(text) == slow_redact(text)


def test_every_piece_alone_and_in_a_long_log_is_found_as_line_by_line():
    filler = "INFO 2026-11-24 08:15:21 step 12 loss 6.907 ips: 380.1 Pass:0 batch:10 fuse_pass_base\n" * 200
    for piece in PIECES:
        for how in range(4):
            text = filler + "x " + cased(piece, how) + " y\n" + filler
            assert rd.redact_text(text) == slow_redact(text), piece


def test_counts_of_tokens_are_not_secrets_but_token_values_are():
    text = ('{"event": "step", "tokens": 4096, "global_batch": 32}\nmax_tokens=5120 lr=0.1\nHF_TOKEN=hf_abc\n'
            '"tokens": "tk-5a7e"\n"token": 123456\nSECRET_TOKENS=12ab\n')
    clean, found = rd.redact_text(text)
    assert '"tokens": 4096' in clean and "max_tokens=5120" in clean
    assert "hf_abc" not in clean and "tk-5a7e" not in clean and "123456" not in clean and "12ab" not in clean
    assert [line for line, _ in found] == [3, 4, 5, 6]


def test_only_these_characters_match_an_ascii_letter_ignoring_case():
    everything = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    assert set(re.findall("[a-zA-Z]", everything, re.IGNORECASE)) == prefilter.FOLDS_TO_ASCII


def test_case_sensitive_search_of_lowered_text_is_allowed_only_where_it_finds_everything():
    flags = re.IGNORECASE | re.UNICODE
    allowed = ["abc", "[a-z]+", "[a-zA-Z0-9_-]{4}", "[^A-Z]x", "x(?![A-Z])", "x(?!A)", "x(?![^a-z])", "\\w+\\d",
               "(a)\\1", "contraseña", "x[^K]", "[0-9a-f]{8}"]
    refused = ["aBc", "[A-Z]+", "[+-a]", "x(?![^A-Z])", "(?-i:abc)", "\u212a", "[\u0100-\u0200]", "[A-F]",
               "[\\dA-F]", "x(?![^K])", "a\\x42c", "(?(1)a|b)"]
    for pattern in allowed:
        assert prefilter.lowered_ok(pattern, flags), pattern
    for pattern in refused:
        assert not prefilter.lowered_ok(pattern, flags), pattern
    assert not prefilter.lowered_ok("abc", re.UNICODE)  # a case-sensitive pattern runs on the text itself
    # and where allowed, it finds on lowered ASCII text all that the pattern finds ignoring case
    for pattern in allowed:
        for text in ("ABC", "abc", "aBc xY", "A-b_C-d9", "1a2B3c4D", "x", "xA", "xa", "x!", "CONTRASEÑA"):
            if text.isascii() and re.search(pattern, text, flags):
                assert re.search(pattern, text.lower(), re.UNICODE), (pattern, text)


def test_gates_are_tails_of_their_patterns():
    for p in rd.PATTERNS:
        gate = prefilter.gate(p.regex)
        if gate is not None:
            assert p.regex.pattern.endswith(gate) and p.gate.pattern == gate and p.gate.flags == p.regex.flags
    assert prefilter.gate(re.compile(r"\d{8,10}:[0-9A-Za-z_-]{35}")) == ":[0-9A-Za-z_-]{35}"
    assert prefilter.gate(re.compile(r"(ghp|gho)_[A-Za-z0-9_]{36}")) is None  # re finds literal alternatives fast
    assert prefilter.gate(re.compile(r"(['\"])x+(\1)\s*key")) is None  # the tail would refer to a group before it
    assert prefilter.gate(re.compile(r"[a-z]+x?y|z")) is None  # an alternative at top level: nothing is mandatory
    assert prefilter.gate(re.compile(r"[a-z]+x?y")) == "y"  # 'x?' is optional
    assert prefilter.gate(re.compile(r"[ab](a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\10x")) is None  # not '0x': group 10


def test_a_streamed_bundle_lists_exactly_the_bytes_it_packs(tmp_path):
    run_dir, _ = scale.generate(tmp_path, nodes=2, repeats=1, trim=True)
    secret = run_dir / "logs" / "notes.txt"
    secret.write_text("export HF_TOKEN=hf_s3cr3t\n")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    bundle = bd.make_bundle(run_dir, tmp_path / "b.tar.gz", submitter="Lab", system_name="box")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before, "the run is only read"
    top = f"kit-bundle-{run_dir.name}"
    with tarfile.open(bundle) as tar:
        members = tar.getmembers()
        assert all(m.isfile() or m.isdir() for m in members) and all(m.name.startswith(top + "/") for m in members)
        packed = {m.name[len(top) + 1:]: tar.extractfile(m).read() for m in members if m.isfile()}
    raw = packed.pop(bd.MANIFEST)
    manifest = json.loads(raw)
    assert bd.manifest_self_ok(raw) and bd.SIGNATURE not in packed
    assert set(manifest["files"]) == set(packed)
    for name, data in packed.items():
        assert manifest["files"][name] == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}, name
    every = {f"run/{run_dir.name}/{p.relative_to(run_dir).as_posix()}" for p in before
             if p.name != "report.html"}  # a rendering of the files bundled: never bundled (kit.audit.bundle)
    assert every <= set(packed)
    assert b"hf_s3cr3t" not in b"".join(packed.values())
    assert packed[f"run/{run_dir.name}/logs/notes.txt"] == b"export HF_TOKEN=<redacted>\n"
    provenance = json.loads(packed["provenance.json"])
    assert {"file": f"run/{run_dir.name}/logs/notes.txt", "line": 1, "key": "HF_TOKEN"} in provenance["redactions"]
    system = json.loads(packed["system.json"])
    assert system["submitter"] == "Lab" and system["number_of_nodes"] == "2"


# ---------------------------------------------------------------------------------------------------------------
# Redaction never changes what the parsers read (issue 31, B11): MLPerf's "key" field, numbers, lookup-field names.

from kit.results.extract import Method, compute_figure  # noqa: E402
from kit.results.parsers import ParseError, parse_log  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")  # as in conftest.py
PUBLISHED = SHARED / "fixtures" / "published-logs"


def _bundled(src: Path, into: Path) -> Path:
    """The file as kit bundle packs it (kit.audit.bundle._redacted: UTF-8 text redacted, other bytes as they are),
    under the same name."""
    data = src.read_bytes()
    try:
        clean, _ = rd.redact_text(data.decode("utf-8"))
        data = clean.encode("utf-8")
    except UnicodeDecodeError:
        pass
    out = into / src.name
    out.write_bytes(data)
    return out


def _reading(path: Path, fmt: str = "auto"):
    """What the parsers make of a log: (format, records, unterminated), or the error without the path."""
    try:
        parsed = parse_log(path, fmt)
    except ParseError as exc:
        return "error", str(exc).replace(str(path), "LOG")
    return parsed.format.name, parsed.records, parsed.unterminated


def _same_before_and_after(src: Path, tmp: Path, fmt: str = "auto"):
    into = tmp / f"{len(list(tmp.iterdir()))}"
    into.mkdir()
    before, after = _reading(src, fmt), _reading(_bundled(src, into), fmt)
    assert after == before, src
    return before


def _every_log(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix not in (".yaml", ".md", ".json", ".gz")]


def test_every_published_and_fixture_log_parses_the_same_after_redaction(tmp_path):
    logs = _every_log(PUBLISHED) + sorted((REPO / "tests" / "fixtures").rglob("*.log"))
    assert len(logs) > 100
    parsed = [_same_before_and_after(p, tmp_path) for p in logs]
    assert sum(r[0] != "error" for r in parsed) > 100  # the logs were read, not merely refused alike


def test_every_published_figure_derives_the_same_after_redaction(tmp_path):
    import yaml

    claims = yaml.safe_load((PUBLISHED / "expected.yaml").read_text())
    cases = [(PUBLISHED / e["file"], e["format"], e["method"]) for e in claims["logs"]]
    for suite in claims["suites"]:
        cases += [(p, suite["format"], suite["method"]) for p in sorted((PUBLISHED / suite["name"]).rglob("*.log"))]
    assert len(cases) > 40
    for src, fmt, method in cases:
        into = tmp_path / f"{len(list(tmp_path.iterdir()))}"
        into.mkdir()
        m = Method.from_mapping(method)
        before = compute_figure(parse_log(src, fmt), m)
        after = compute_figure(parse_log(_bundled(src, into), fmt), m)
        assert after == before, src


def test_every_format_of_a_generated_run_parses_the_same_after_redaction(tmp_path):
    """A run of the whole v100 suite (bench/scale.py: the harness's KITLOG lines, NLP epochs included, and the
    published programs' formats as they print them, on every host and rank)."""
    run_dir, _ = scale.generate(tmp_path / "gen", nodes=2, repeats=1, trim=True)
    logs = [p for p in sorted(run_dir.rglob("*")) if p.is_file() and (p.suffix == ".log" or "workerlog." in p.name)]
    work = tmp_path / "after"
    work.mkdir()
    formats = {_same_before_and_after(p, work)[0] for p in logs}
    assert {"kitlog", "paddleclas", "plsc", "fleetx-vgg", "dle-pytorch", "dle-tf1", "dle-mxnet"} <= formats


def _mllog(tmp_path: Path) -> Path:
    """A log written by mlcommons' own logger (mlperf_logging.mllog), as an MLPerf training program writes it."""
    path = tmp_path / "mlperf.log"
    program = f"""
from mlperf_logging import mllog
from mlperf_logging.mllog import constants as c
mllog.config(filename={str(path)!r}, root_dir={str(tmp_path)!r})
log = mllog.get_mllogger()
log.event(key=c.CACHE_CLEAR, value=True)
log.start(key=c.INIT_START)
log.event(key=c.SUBMISSION_ORG, value="Lab")
log.event(key=c.GLOBAL_BATCH_SIZE, value=256)
log.end(key=c.INIT_STOP)
log.start(key=c.RUN_START)
for step in range(1, 6):
    log.event(key="tracked_stats", value={{"throughput": 2400.5 + step, "tokens": 4096.5, "cache_key": "k-{{}}".format(step)}},
              metadata={{"step": step, "sort_key": "throughput"}})
log.end(key=c.RUN_STOP, value=None, metadata={{"status": "success"}})
"""
    import subprocess

    subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, cwd=tmp_path)
    return path


def test_mlperf_logs_keep_their_key_field_and_numbers(tmp_path):
    log = _mllog(tmp_path)
    text = log.read_text()
    assert text.count('"key": "tracked_stats"') == 5
    assert rd.redact_text(text) == (text, [])  # nothing in it is a secret
    fmt, records, _ = _same_before_and_after(log, tmp_path)
    assert fmt == "kitlog" and [r.value for r in records] == [2401.5, 2402.5, 2403.5, 2404.5, 2405.5]


def test_an_nlp_run_s_fractional_token_counts_are_carried_as_written(tmp_path):
    """"tokens": 1900000.0 names a count, not a secret: kit bundle carries it byte for byte. The harness writes whole
    counts, so the one reader refuses such a log naming its line: the grammar judges it, never the redactor."""
    run_dir, _ = scale.generate(tmp_path, nodes=2, repeats=1, trim=True)
    nlp = [p for p in run_dir.rglob("*.log") if '"event": "epoch"' in p.read_text()]
    assert nlp
    into = tmp_path / "bundled"
    into.mkdir()
    for p in nlp:
        parse_log(p)  # as generated: whole counts, read
        p.write_text(re.sub(r'"tokens": (\d+)', r'"tokens": \1.0', p.read_text()))
        assert _bundled(p, into).read_bytes() == p.read_bytes()
        with pytest.raises(ParseError, match=r"tokens \d+\.0"):
            parse_log(p)


MLLOG_LINE = (':::MLLOG {"namespace": "", "time_ms": 1611234567890, "event_type": "POINT_IN_TIME", "key": '
              '"tracked_stats", "value": {"throughput": 2412.6}, "metadata": {"file": "train.py", "lineno": 3, '
              '"step": 42}}')
KEPT = [  # lines holding no secret, which the parsers read (or which merely name a field): kept byte for byte
    MLLOG_LINE,
    ":::MLLOG {'key': 'tracked_stats', 'value': {'throughput': 2412.6}}",
    '[1,0]<stdout>::::MLLOG {"key": "tracked_stats", "value": {"throughput": 2412.6}}',
    ':::KITLOG {"kit": 1, "event": "epoch", "epoch": 1, "tokens": 4096.5, "seconds": 52.1, "unit": "tokens/s"}',
    '"tokens": 1e5', '"tokens": -3', '"tokens": [4096, 8192]', "max_tokens=5120.0", "num_keys: 12",
    "cache_key=/root/.cache/torch/kernels sort_key=throughput", '"sort_key": "samples_per_sec"',
    '{"cache_key": "resnet50-b256", "primary_key": "id"}', "'pad_token': '<pad>', 'eos_token': '</s>',",
    "missing_keys=['fc.weight'] unexpected_keys=[]",
]
STILL_SECRET = {  # and the same words around real secrets: still redacted
    '{"key": "ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"}': "ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
    "cache_key=AKIAIOSFODNN7EXAMPLE": "AKIAIOSFODNN7EXAMPLE",
    '"token": 4096': "4096", "PASSWORD=1234": "1234", "HF_TOKEN=hf_abc": "hf_abc", "key: hunter2": "hunter2",
    '"tokens": "tk-5a7e"': "tk-5a7e", "WANDB_API_KEY: k-99": "k-99", "api_key = 3.5": "3.5",
    "SECRET_TOKENS=12ab": "12ab", '"auth_key": "x9"': "x9", "OPENAI_KEY=sk-abc": "sk-abc",
    '{"service": "wandb", "key": "a1b2c3d4"}': "a1b2c3d4",  # "key" is structural only in an MLLOG/KITLOG line
}


def test_structural_keys_numbers_and_lookup_names_are_kept_secrets_are_not():
    for line in KEPT:
        assert rd.redact_text(line) == (line, []), line
    for line, secret in STILL_SECRET.items():
        clean, found = rd.redact_text(line)
        assert secret not in clean and found, line


def test_a_tracked_stats_line_still_parses_after_redaction(tmp_path):
    log = tmp_path / "tracked.log"
    log.write_text("".join(MLLOG_LINE.replace("42", str(step)) + "\n" for step in range(1, 4)))
    work = tmp_path / "after"
    work.mkdir()
    fmt, records, _ = _same_before_and_after(log, work)
    assert fmt == "kitlog" and [r.value for r in records] == [2412.6] * 3
