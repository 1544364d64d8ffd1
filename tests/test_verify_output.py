"""What kit verify and kit bundle print from a bundle or a log cannot shape the output (issue 31, D17): a member
named "\\n  OK: fake\\x1b[2K" is printed escaped, on its own line, and the real verdict stays the last line."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.audit import bundle as bd
from kit.audit import rules as rl
from kit.audit.verify import verify_tree
from kit.cli import main
from kit.core.text import UNSAFE, printable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import scale  # noqa: E402

FAKE = "\n  OK: fake\x1b[2K"
BIDI = "\u202eflow.json\u2066"
# every character a terminal or str.splitlines treats as a control, a line end or a reordering
CONTROLS = ([chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
            + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
            + ["\u2028", "\u2029", "\u200e", "\u200f", "\u061c"])


def raw_controls(text: str) -> list[str]:
    """The control characters in printed text, but the newlines that end its lines."""
    return sorted({c for line in text.split("\n") for c in line if c in UNSAFE})


def test_printable_escapes_each_kind_of_control_character():
    assert printable("a\nb") == "a\\nb"
    assert printable("\r\t") == "\\r\\t"
    assert printable(FAKE) == "\\n  OK: fake\\x1b[2K"
    assert printable("\x00\x07\x08\x0b\x0c\x1b\x1f") == "\\x00\\x07\\x08\\x0b\\x0c\\x1b\\x1f"
    assert printable("del\x7f") == "del\\x7f"
    assert printable("\x80\x85\x9b\x9f") == "\\x80\\x85\\x9b\\x9f"  # C1: NEL, CSI
    assert printable(BIDI) == "\\u202eflow.json\\u2066"
    assert printable("".join(chr(c) for c in range(0x202A, 0x202F))) == "\\u202a\\u202b\\u202c\\u202d\\u202e"
    assert printable("".join(chr(c) for c in range(0x2066, 0x206A))) == "\\u2066\\u2067\\u2068\\u2069"
    assert printable("\u2028\u2029") == "\\u2028\\u2029"
    assert set(CONTROLS) == UNSAFE


def test_printable_keeps_everything_else_as_it_is():
    for text in ("run/v100/logs/torch/resnet50/bz256/1n8g/resnet50_b256_fp32_1.log", "contraseña",
                 "日本語 ログ", "emoji 🚀", "C:\\data\\x", "a\\nb", "\xa0nbsp", "tab-less", "", "\u00e9"):
        assert printable(text) == text
    assert printable(42) == "42" and printable(Path("a/b")) == "a/b"


@settings(deadline=None, database=None, max_examples=300)
@given(st.text(alphabet=st.one_of(st.sampled_from(CONTROLS), st.characters()), max_size=40))
def test_printable_output_is_one_line_without_controls(text):
    out = printable(text)
    assert not UNSAFE & set(out)
    assert len(out.splitlines()) <= 1
    assert all(unicodedata.category(c) not in ("Cc", "Zl", "Zp") for c in out)
    if not UNSAFE & set(text):
        assert out == text


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory) -> tuple[Path, Path]:
    """A generated run of the v100 suite (bench/scale.py) and its bundle, which verifies."""
    base = tmp_path_factory.mktemp("out")
    run_dir, _ = scale.generate(base, nodes=2, repeats=1, trim=True)
    return run_dir, bd.make_bundle(run_dir, base / "b.tar.gz", submitter="Lab", system_name="box")


def _forged(clean_bundle, tmp_path: Path) -> tuple[Path, list[str]]:
    """The bundle unpacked, with members named to print lines of their own (not in the manifest: violations)."""
    root = bd.unpack(clean_bundle[1], tmp_path / "open")
    run = next((root / "run").iterdir())
    names = [f"x{FAKE}", f"notes{BIDI}", "bell\x07\x85\u2028\x7f.txt"]
    for name in names:
        (run / name).write_text(f"{FAKE}\n")
    return root, [f"run/{run.name}/{name}" for name in names]


def test_verify_lines_escape_member_names_and_end_with_the_real_verdict(clean_bundle, tmp_path):
    root, members = _forged(clean_bundle, tmp_path)
    result = verify_tree(root)
    assert not result.ok
    assert {v.where for v in result.violations} >= set(members)  # the names themselves are kept exact
    lines = result.lines()
    text = "\n".join(lines)
    assert not raw_controls(text)
    assert text.splitlines() == lines  # no line holds a line break of any kind
    assert lines[-1].startswith("NOT OK: ") and "violation(s)" in lines[-1]
    assert not any(line.lstrip().startswith("OK: fake") for line in lines)
    for member in members:
        assert any(printable(member) in line for line in lines), member


def test_kit_verify_prints_no_raw_control_character(clean_bundle, tmp_path, capsys):
    root, members = _forged(clean_bundle, tmp_path)
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out
    assert not raw_controls(out)
    lines = out.splitlines()
    assert lines[-1].startswith("NOT OK: ")
    assert "\\n  OK: fake\\x1b[2K" in out and "\\u202eflow.json\\u2066" in out

    assert main(["verify", str(root), "--json"]) == 1
    out = capsys.readouterr().out
    assert not raw_controls(out)
    report = json.loads(out)
    assert report["verdict"] == "NOT OK" and not report["ok"]
    assert {v["file"] for v in report["violations"]} >= set(members)  # exact names for machines


def test_kit_verify_and_bundle_errors_escape_the_path_given(tmp_path, capsys):
    missing = tmp_path / f"no{FAKE}"
    assert main(["verify", str(missing)]) == 2
    err = capsys.readouterr().err
    assert not raw_controls(err) and len(err.splitlines()) == 1 and "\\x1b[2K" in err
    assert main(["bundle", str(missing)]) == 2
    err = capsys.readouterr().err
    assert not raw_controls(err) and len(err.splitlines()) == 1 and "\\x1b[2K" in err


def test_kit_bundle_prints_its_violations_escaped(clean_bundle, tmp_path, capsys, monkeypatch):
    """kit bundle verifies what it wrote and lists any violation: a member's name and a message quoting a log
    are printed escaped."""
    import kit.audit.verify as vf

    real = vf.verify

    def verify_with_a_finding(bundle, *args, **kwargs):
        result = real(bundle, *args, **kwargs)
        result.extra.append(rl.Violation("readable", f"line 3 says {FAKE!s}", f"run/x/{BIDI}"))
        return result

    monkeypatch.setattr(vf, "verify", verify_with_a_finding)
    run_dir = clean_bundle[0]
    out = tmp_path / f"b{FAKE}.tar.gz"
    assert main(["bundle", str(run_dir), "-o", str(out), "--submitter", "Lab", "--system-name", "box"]) == 1
    captured = capsys.readouterr()
    assert not raw_controls(captured.out) and not raw_controls(captured.err)
    assert len(captured.out.splitlines()) == 1  # the bundle's own line, with its name escaped
    assert "[readable] run/x/\\u202eflow.json\\u2066: line 3 says \\n  OK: fake\\x1b[2K" in captured.err
