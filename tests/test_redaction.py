"""Redaction's shortcuts (kit.audit.redact: needle lines, gates, case-sensitive search of lowered text) skip only
text no pattern can match: redact_text finds exactly what every pattern finds on every line. And the streamed
bundle (kit.audit.bundle: no copy of the run on disk) lists exactly the bytes it packs."""

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
from kit.audit import redact as rd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

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
    assert set(re.findall("[a-zA-Z]", everything, re.IGNORECASE)) == rd._FOLDS_TO_ASCII


def test_case_sensitive_search_of_lowered_text_is_allowed_only_where_it_finds_everything():
    flags = re.IGNORECASE | re.UNICODE
    allowed = ["abc", "[a-z]+", "[a-zA-Z0-9_-]{4}", "[^A-Z]x", "x(?![A-Z])", "x(?!A)", "x(?![^a-z])", "\\w+\\d",
               "(a)\\1", "contraseña", "x[^K]", "[0-9a-f]{8}"]
    refused = ["aBc", "[A-Z]+", "[+-a]", "x(?![^A-Z])", "(?-i:abc)", "\u212a", "[\u0100-\u0200]", "[A-F]",
               "[\\dA-F]", "x(?![^K])", "a\\x42c", "(?(1)a|b)"]
    for pattern in allowed:
        assert rd._lowered_ok(pattern, flags), pattern
    for pattern in refused:
        assert not rd._lowered_ok(pattern, flags), pattern
    assert not rd._lowered_ok("abc", re.UNICODE)  # a case-sensitive pattern runs on the text itself
    # and where allowed, it finds on lowered ASCII text all that the pattern finds ignoring case
    for pattern in allowed:
        for text in ("ABC", "abc", "aBc xY", "A-b_C-d9", "1a2B3c4D", "x", "xA", "xa", "x!", "CONTRASEÑA"):
            if text.isascii() and re.search(pattern, text, flags):
                assert re.search(pattern, text.lower(), re.UNICODE), (pattern, text)


def test_gates_are_tails_of_their_patterns():
    for p in rd.PATTERNS:
        gate = rd._gate(p.regex)
        if gate is not None:
            assert p.regex.pattern.endswith(gate) and p.gate.pattern == gate and p.gate.flags == p.regex.flags
    assert rd._gate(re.compile(r"\d{8,10}:[0-9A-Za-z_-]{35}")) == ":[0-9A-Za-z_-]{35}"
    assert rd._gate(re.compile(r"(ghp|gho)_[A-Za-z0-9_]{36}")) is None  # re finds literal alternatives fast
    assert rd._gate(re.compile(r"(['\"])x+(\1)\s*key")) is None  # the tail would refer to a group before it
    assert rd._gate(re.compile(r"[a-z]+x?y|z")) is None  # an alternative at top level: nothing is mandatory
    assert rd._gate(re.compile(r"[a-z]+x?y")) == "y"  # 'x?' is optional
    assert rd._gate(re.compile(r"[ab](a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\10x")) is None  # not '0x': group 10


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
    every = {f"run/{run_dir.name}/{p.relative_to(run_dir).as_posix()}" for p in before}
    assert every <= set(packed)
    assert b"hf_s3cr3t" not in b"".join(packed.values())
    assert packed[f"run/{run_dir.name}/logs/notes.txt"] == b"export HF_TOKEN=<redacted>\n"
    provenance = json.loads(packed["provenance.json"])
    assert {"file": f"run/{run_dir.name}/logs/notes.txt", "line": 1, "key": "HF_TOKEN"} in provenance["redactions"]
    system = json.loads(packed["system.json"])
    assert system["submitter"] == "Lab" and system["number_of_nodes"] == "2"
