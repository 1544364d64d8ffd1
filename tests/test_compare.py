"""kit compare: asv-style verdicts per case, exact Mann-Whitney p-values, Markdown, exit codes.

The real data is the results.json of a real CPU run (tests/fixtures/compare/, 3 repeats per
case); the second run scales its real per-run values by known factors.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest

from kit.cli import main
from kit.core.inputs import InputError
from kit.results import compare as cmp

REAL = Path(__file__).parent / "fixtures/compare/local-20261121-112508/results.json"

# (framework, model, nodes, gpus) -> factor for run B; a case left out is absent from B
SCALE = {
    ("paddle", "arcface", 1, 1): 0.5,  # clearly slower: the 99% CIs come apart
    ("paddle", "resnet50", 1, 1): 0.7,  # beyond the factor, but 3 repeats at CV 5.9% cannot tell
    ("paddle", "vgg16", 1, 1): 2.0,  # clearly faster
    ("torch", "arcface", 1, 1): 1.03,  # within the factor
    ("torch", "resnet50", 1, 1): 1.0,  # the same values
    ("torch", "vgg16", 1, 1): 0.8,  # CV 1.8%: 0.8 is enough to be sure
}


def _real() -> dict:
    return json.loads(REAL.read_text())


def _key(g: dict, c: dict) -> tuple:
    return g["framework"], g["model"], c["nodes"], c["gpus_per_node"]


def _scaled(data: dict, scale: dict) -> dict:
    data = json.loads(json.dumps(data))
    for g in data["groups"]:
        g["cases"] = [c for c in g["cases"] if _key(g, c) in scale]
        for c in g["cases"]:
            for r in c["runs"]:
                r["value"] *= scale[_key(g, c)]
            c["median"] = statistics.median(r["value"] for r in c["runs"])
    data["groups"] = [g for g in data["groups"] if g["cases"]]
    return data


def _run(tmp_path: Path, name: str, data: dict) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(data, indent=2))
    return d


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a = tmp_path / "local-20261121-112508"
    a.mkdir()
    shutil.copy(REAL, a / "results.json")
    b = _scaled(_real(), SCALE)
    b["failures"] = [{"file": "torch/resnet50/bz16/1n2g/resnet50_b16_fp32_1.log", "reason": "empty file"}]
    return a, _run(tmp_path, "local-B", b)


def _make(cases: dict, unit: str = "samples/s", failures=()) -> dict:
    """A minimal results.json: cases = {(framework, model, nodes, gpus): values}; batch 16, fp32."""
    groups = {}
    for (fw, model, nodes, gpus), values in cases.items():
        g = groups.setdefault((fw, model), {"framework": fw, "model": model, "batch_per_device": 16,
                                            "precision": "fp32", "unit": unit, "cases": []})
        g["cases"].append({"case": f"{nodes}n{gpus}g", "nodes": nodes, "gpus_per_node": gpus,
                           "runs": [{"run": i + 1, "value": v} for i, v in enumerate(values)]})
    return {"schema_version": 1, "groups": list(groups.values()),
            "failures": [{"file": f, "reason": "empty file"} for f in failures]}


def _rows(a: dict, b: dict, **kw) -> list[cmp.Row]:
    return cmp.compare(cmp.parse_results(a, "a/results.json"), cmp.parse_results(b, "b/results.json"), **kw)


# ----- the real run against a scaled copy -----

def test_real_run_against_scaled_copy_gives_exact_verdicts(tmp_path):
    a, b = _runs(tmp_path)
    rows = cmp.compare(cmp.load_results(a), cmp.load_results(b))
    assert [(r.label, r.verdict) for r in rows] == [
        ("paddle · arcface · batch 16 · fp32 · 1n1g", "slower"),
        ("paddle · resnet50 · batch 16 · fp32 · 1n1g", "no significant change"),
        ("paddle · resnet50 · batch 16 · fp32 · 1n2g", "only in A"),
        ("paddle · vgg16 · batch 16 · fp32 · 1n1g", "faster"),
        ("torch · arcface · batch 16 · fp32 · 1n1g", "within factor"),
        ("torch · resnet50 · batch 16 · fp32 · 1n1g", "within factor"),
        ("torch · resnet50 · batch 16 · fp32 · 1n2g", "failed in B"),
        ("torch · vgg16 · batch 16 · fp32 · 1n1g", "slower"),
    ]
    by = {r.label.split(" · ")[0] + " " + r.label.split(" · ")[1] + " " + r.label[-4:]: r for r in rows}
    arc = by["paddle arcface 1n1g"]
    assert arc.median_a == pytest.approx(14.37360718249151) and arc.ratio == pytest.approx(0.5)
    assert arc.test == "ci" and arc.p is None and arc.reason == "99% CIs of the medians apart"
    assert by["paddle resnet50 1n1g"].reason == "beyond factor 1.1, not significant: 99% CIs of the medians overlap"
    assert by["torch arcface 1n1g"].ratio == pytest.approx(1.03)
    assert by["torch resnet50 1n2g"].reason == "1 log(s) failed in B" and by["torch resnet50 1n2g"].b == ()
    assert by["paddle resnet50 1n2g"].reason == "no such case in B"
    assert by["paddle vgg16 1n1g"].ratio == pytest.approx(2.0)


def test_real_run_against_itself_is_unchanged_everywhere(tmp_path):
    a = _run(tmp_path, "a", _real())
    rows = cmp.compare(cmp.load_results(a), cmp.load_results(REAL))
    assert len(rows) == 8 and {r.verdict for r in rows} == {"within factor"} and {r.ratio for r in rows} == {1.0}
    assert cmp.to_markdown(rows).splitlines()[-1] == (
        "Summary: 0 faster, 0 slower, 0 inconclusive, 8 unchanged (8 within factor, 0 not significant), 0 only in A, "
        "0 only in B, 0 failed."
    )


def test_three_repeats_fall_back_to_confidence_intervals_and_say_so(tmp_path):
    a, b = _runs(tmp_path)
    rows = cmp.compare(cmp.load_results(a), cmp.load_results(b))
    assert {r.test for r in rows if r.a and r.b} == {"ci"}
    # even three against three that do not interleave at all give p = 0.1
    assert cmp.mann_whitney_u([7.19, 7.37, 6.52], [14.37, 14.76, 13.03]) == (0, pytest.approx(0.1))
    text = cmp.to_markdown(rows)
    assert (
        "Note: 3 vs 3 repeats: the exact two-sided Mann-Whitney U test cannot go below p = 0.1, so it can never "
        "reach p < 0.002; as asv does, these cases fall back to whether the 99% confidence intervals of the two "
        "medians overlap, a cruder test. The U test needs at least 7 repeats per case on each side."
    ) in text.splitlines()


def test_a_larger_factor_turns_the_real_slowdowns_into_within_factor(tmp_path):
    a, b = _runs(tmp_path)
    rows = cmp.compare(cmp.load_results(a), cmp.load_results(b), factor=2.5)
    assert [r.verdict for r in rows if r.test] == ["within factor"] * 6


# ----- the statistics, against hand-computed values -----

@pytest.mark.parametrize(
    ("x", "y", "u", "p"),
    [
        ([1, 2, 3], [4, 5, 6], 0, 2 / 20),  # C(6,3) = 20 orderings, 1 at each extreme
        ([1, 2, 4], [3, 5, 6], 1, 2 * 2 / 20),  # P(U <= 1) = (1 + 1) / 20
        ([1, 2, 5], [3, 4, 6], 2, 2 * 4 / 20),  # P(U <= 2) = (1 + 1 + 2) / 20
        ([1, 2, 3], [3, 4, 5], 1, 2 * 2 / 20),  # the tie counts the less significant way: U = 1, not 0
        ([1, 2], [3, 4], 0, 2 / 6),
        ([1, 1], [1, 1], 2, 1.0),  # all ties: U at the centre, p capped at 1
        ([1, 2, 3, 4, 6], [5, 7, 8, 9, 10], 1, 2 * 2 / 252),  # C(10,5) = 252
        ([7, 8, 9, 10, 11, 12, 13], [1, 2, 3, 4, 5, 6, 6.5], 49, 2 / 3432),  # C(14,7) = 3432; U = 7 * 7
    ],
)
def test_mann_whitney_exact_p_values(x, y, u, p):
    assert cmp.mann_whitney_u(x, y) == (u, pytest.approx(p, rel=1e-12))


def test_orderings_of_three_against_three():
    # by enumeration of the 20 arrangements (Mann & Whitney 1947, table I)
    assert [cmp._orderings(3, 3, u) for u in range(10)] == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]


def test_mann_whitney_normal_approximation_beyond_twenty():
    x, y = list(range(21)), [v + 100 for v in range(21)]
    z = (0 - 21 * 21 / 2) / math.sqrt(21 * 21 * 43 / 12)
    assert cmp.mann_whitney_u(x, y)[1] == pytest.approx(2 * statistics.NormalDist().cdf(z), rel=1e-9)
    assert cmp.mann_whitney_u(x, y)[1] < 1e-7


def test_smallest_attainable_p_and_repeats_needed():
    assert cmp.smallest_p(3, 3) == pytest.approx(0.1)
    assert cmp.smallest_p(6, 6) == pytest.approx(2 / 924) and cmp.smallest_p(6, 6) > 0.002
    assert cmp.smallest_p(7, 7) == pytest.approx(2 / 3432)
    assert cmp.repeats_needed(0.002) == 7 and cmp.repeats_needed(0.05) == 4


def test_median_confidence_intervals():
    # two values: density 1/(4 b^2) in the tails of the posterior, 0.5% of the mass at 50 half-ranges
    assert cmp.median_ci99([9, 11]) == (pytest.approx(-40), pytest.approx(60))
    # three values: tail mass 1/(54 b^2) of 19/108, so 0.5% at 20/sqrt(19) from the median
    lo, hi = cmp.median_ci99([11, 9, 10])
    assert (lo, hi) == (pytest.approx(10 - 20 / math.sqrt(19)), pytest.approx(10 + 20 / math.sqrt(19)))
    # order statistics once the binomial allows: P(K <= 0) = 1/256 <= 0.5% for 8 values
    assert cmp.median_ci99(range(8)) == (0, 7)
    # 20 values: P(K <= 3) = 0.0013, P(K <= 4) = 0.0059; P(K <= 16) = 0.9987 is the first >= 99.5%
    assert cmp.median_ci99(range(20)) == (3, 16)
    assert cmp.median_ci99([5, 5, 5]) == (5, 5)


def test_seven_repeats_use_mann_whitney_six_do_not():
    a7, b7 = [100, 101, 102, 103, 104, 105, 106], [120, 121, 122, 123, 124, 125, 126]
    (row,) = _rows(_make({("torch", "resnet50", 1, 1): a7}), _make({("torch", "resnet50", 1, 1): b7}))
    assert (row.verdict, row.test, row.reason) == ("faster", "mann-whitney", "Mann-Whitney p=0.00058")
    assert row.p == pytest.approx(2 / 3432)
    (row,) = _rows(_make({("torch", "resnet50", 1, 1): a7[:6]}), _make({("torch", "resnet50", 1, 1): b7[:6]}))
    assert (row.verdict, row.test) == ("faster", "ci")
    mixed = [100, 130, 131, 132, 133, 101, 102]  # median 103 -> 130, beyond the factor, but 3 of 7 overlap A
    (row,) = _rows(_make({("torch", "resnet50", 1, 1): a7}), _make({("torch", "resnet50", 1, 1): mixed}))
    assert (row.verdict, row.test) == ("no significant change", "mann-whitney")
    # 15 pairs a > b and 3 ties: U = 18 (the ties counted towards the centre, 24.5), p = 2 P(U <= 18) = 0.456
    assert (row.ratio, row.p) == (pytest.approx(130 / 103), pytest.approx(0.4557, abs=1e-4))


def test_one_repeat_leaves_the_factor_alone_to_decide():
    (row,) = _rows(_make({("paddle", "vgg16", 1, 1): [10.0]}), _make({("paddle", "vgg16", 1, 1): [8.0, 8.1]}))
    assert (row.verdict, row.test, row.reason) == ("slower", "none", "1 repeat: the factor alone decides")
    assert "Note: a single repeat on one side" in cmp.to_markdown([row])


def test_a_time_unit_is_better_lower():
    a = _make({("paddle", "resnet50", 1, 1): [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06]}, unit="s")
    b = _make({("paddle", "resnet50", 1, 1): [0.5, 0.51, 0.52, 0.53, 0.54, 0.55, 0.56]}, unit="s")
    (row,) = _rows(a, b)
    assert row.verdict == "faster" and row.ratio == pytest.approx(0.53 / 1.03)


def test_failures_name_the_cases_that_failed():
    case = ("torch", "vgg16", 1, 1)
    log = "torch/vgg16/bz16/1n1g/vgg16_b16_fp32_{}.log"
    rows = _rows(_make({}, failures=[log.format(1), log.format(2)]), _make({case: [18.0, 18.5, 19.0]}))
    assert [(r.verdict, r.reason) for r in rows] == [("failed in A", "2 log(s) failed in A")]
    rows = _rows(_make({}, failures=[log.format(1)]), _make({}, failures=[log.format(1)]))
    assert [r.verdict for r in rows] == ["failed in both"]
    rows = _rows(_make({case: [18.0, 18.5, 19.0]}), _make({case: [18.2, 18.9]}, failures=[log.format(3)]))
    assert [(r.verdict, r.reason) for r in rows] == [
        ("within factor", "within factor 1.1; 99% CIs of the medians overlap; 1 log(s) failed in B")
    ]
    rows = _rows(_make({}), _make({case: [18.0]}))
    assert [(r.verdict, r.reason) for r in rows] == [("only in B", "no such case in A")]


# ----- Markdown -----

def test_markdown_of_a_small_example():
    a = _make({("torch", "resnet50", 1, 1): [100, 101, 102, 103, 104, 105, 106],
               ("torch", "resnet50", 1, 2): [10, 11, 12]})
    b = _make({("torch", "resnet50", 1, 1): [120, 121, 122, 123, 124, 125, 126],
               ("torch", "resnet50", 1, 2): [5, 5.5, 6]})
    lines = cmp.to_markdown(_rows(a, b), "run-a", "run-b").splitlines()
    assert lines[0] == "# Throughput comparison: run-a → run-b"
    table = lines[lines.index("| case | unit | A | B | ratio | verdict | why |"):][:4]
    assert table == [
        "| case | unit | A | B | ratio | verdict | why |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| torch · resnet50 · batch 16 · fp32 · 1n1g | images/s | 103.00 | 123.00 | 1.194 | faster "
        "| Mann-Whitney p=0.00058 |",
        "| torch · resnet50 · batch 16 · fp32 · 1n2g | images/s | 11.00 | 5.50 | 0.500 | no significant change "
        "| beyond factor 1.1, not significant: 99% CIs of the medians overlap |",
    ]
    assert lines[-1] == ("Summary: 1 faster, 0 slower, 0 inconclusive, 1 unchanged (0 within factor, 1 not significant), "
                         "0 only in A, 0 only in B, 0 failed.")
    assert sum(line.startswith("Note: 3 vs 3 repeats") for line in lines) == 1
    only = cmp.to_markdown(_rows(a, b), "run-a", "run-b", only_changed=True)
    assert "1n2g" not in only and only.rstrip().endswith("; 1 unchanged case(s) not shown.")



def test_case_names_with_a_pipe_or_a_newline_stay_in_their_table_cell(tmp_path):
    a = _make({("tor|ch", "res\nnet|50", 1, 1): [100, 101, 102], ("torch", "vgg16", 1, 1): [10, 11, 12]},
              unit="samples/s|x")
    lines = cmp.to_markdown(_rows(a, a), "run|a\n# injected", "run-b").splitlines()
    assert lines[0] == "# Throughput comparison: run\\|a # injected → run-b"
    rows = [line for line in lines if line.startswith("| ") and "·" in line]
    assert len(rows) == 2 and rows[1].startswith("| tor\\|ch · res net\\|50 · batch 16 · fp32 · 1n1g | samples/s\\|x |")
    for row in rows:  # 7 cells: 8 pipes that are not escaped
        assert len(re.findall(r"(?<!\\)\|", row)) == 8, row


# ----- command line -----

def test_cli_prints_markdown_writes_out_and_exit_codes(tmp_path, capsys):
    a, b = _runs(tmp_path)
    out = tmp_path / "reports/compare.md"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# Throughput comparison: local-20261121-112508 → local-B\n")
    assert out.read_text() == printed
    assert "| paddle · arcface · batch 16 · fp32 · 1n1g | images/s | 14.37 | 7.19 | 0.500 | slower |" in printed
    assert main(["compare", str(a), str(b), "--fail-on-slower"]) == 1
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--fail-on-slower", "--factor", "2.5"]) == 0
    assert "| 0.500 | within factor | within factor 2.5; 99% CIs of the medians apart |" in capsys.readouterr().out
    assert main(["compare", str(a), str(b / "results.json"), "--only-changed"]) == 0
    shown = capsys.readouterr().out
    assert "within factor |" not in shown and "| slower |" in shown
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(a), str(b), "--factor", "0.9"])
    assert exc.value.code == 2


def test_cli_refuses_bad_inputs_naming_the_file(tmp_path, capsys):
    a, _ = _runs(tmp_path)
    (tmp_path / "empty").mkdir()
    bad_json = _run(tmp_path, "bad-json", {})
    (bad_json / "results.json").write_text("{not json")
    v2 = _run(tmp_path, "v2", {**_real(), "schema_version": 2})
    data = _real()
    del data["groups"][1]["unit"]
    no_unit = _run(tmp_path, "no-unit", data)
    data = _real()
    data["groups"][0]["cases"][0]["runs"][1]["value"] = 0
    zero = _run(tmp_path, "zero", data)
    data = _real()
    data["groups"][2]["unit"] = "steps/s"  # (images/s is samples/s of an image model: layouts 2 and 3 compare)
    other_unit = _run(tmp_path, "other-unit", data)
    cases = [
        (tmp_path / "nope", f"{tmp_path / 'nope'}: no such run directory or results.json"),
        (tmp_path / "empty", f"{tmp_path / 'empty/results.json'}: no such file"),
        (bad_json, f"{bad_json / 'results.json'}: not JSON ("),
        (v2, f"{v2 / 'results.json'}: schema_version 2; this kit reads 1"),
        (no_unit, f"{no_unit / 'results.json'}: groups[1].unit: missing or not str"),
        (zero, f"{zero / 'results.json'}: groups[0].cases[0]: runs need positive finite values"),
        (other_unit, f"{other_unit / 'results.json'}: paddle · vgg16 · batch 16 · fp32 · 1n1g: unit 'steps/s', "
                     f"but 'images/s' in {a / 'results.json'}; not comparable"),
    ]
    for path, message in cases:
        assert main(["compare", str(a), str(path)]) == 2, path
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(f"kit: {message}"), captured.err
    with pytest.raises(InputError, match="schema_version 2"):
        cmp.load_results(v2)


# ----- a busy host: the report's rule (kit.results.noise) from run.json's host_load records -----

HOST_LOAD = json.loads((REAL.parents[1] / "host-load.json").read_text())  # real records: busy, quiet


def _host_load(run_dir: Path, load_of) -> None:
    """run.json beside run_dir's results.json: every run's host_load record, load_of(framework, model) names which."""
    runs = {}
    for g in json.loads((run_dir / "results.json").read_text())["groups"]:
        for c in g["cases"]:
            for r in c["runs"]:
                file = r.get("file") or f"{g['framework']}/{g['model']}/bz16/{c['case']}/{g['model']}_b16_fp32_{r['run']}.log"
                runs[f"logs/{file}"] = {"case": f"{g['framework']}/{g['model']}", "repeat": r["run"], "status": "ok",
                                        "host_load": HOST_LOAD[load_of(g["framework"], g["model"])]}
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "runs": runs}))


def test_a_case_from_a_busy_host_is_never_faster_or_slower_and_says_why(tmp_path, capsys):
    a, b = _runs(tmp_path)
    assert main(["compare", str(a), str(b), "--fail-on-slower"]) == 1  # the quiet baseline: two cases slower
    capsys.readouterr()
    _host_load(a, lambda fw, model: "busy" if (fw, model) == ("torch", "arcface") else "quiet")
    _host_load(b, lambda fw, model: "busy" if model in ("arcface", "vgg16") and fw == "paddle" or
               (fw, model) == ("torch", "vgg16") else "quiet")
    assert main(["compare", str(a), str(b), "--fail-on-slower"]) == 0  # every slowdown ran on a busy host
    out = capsys.readouterr().out
    rows = {r.split(" | ")[0][2:]: r for r in out.splitlines() if r.startswith("| paddle") or r.startswith("| torch")}
    busy_b = "B: host busy during 3 of 3 runs (other processes used up to 73% of the CPU)"
    assert rows["paddle · arcface · batch 16 · fp32 · 1n1g"].endswith(
        f"| 0.500 | inconclusive | slower beyond factor 1.1, but {busy_b}; 99% CIs of the medians apart |")
    assert rows["paddle · vgg16 · batch 16 · fp32 · 1n1g"].endswith(
        f"| 2.000 | inconclusive | faster beyond factor 1.1, but {busy_b}; 99% CIs of the medians apart |")
    assert f"| inconclusive | slower beyond factor 1.1, but {busy_b}; " in rows["torch · vgg16 · batch 16 · fp32 · 1n1g"]
    assert rows["torch · arcface · batch 16 · fp32 · 1n1g"].endswith(  # unchanged, and A's busy host said
        "| within factor | within factor 1.1; 99% CIs of the medians overlap; A: host busy during 3 of 3 runs (other "
        "processes used up to 73% of the CPU) |")
    assert "host busy" not in rows["torch · resnet50 · batch 16 · fp32 · 1n1g"]
    assert ("Note: 4 case(s) ran on a busy host on one side or both (busy: other processes used more than 10% of the "
            "machine's CPU time during a run, or a GPU ran another process when check-env captured the host): never "
            "called faster or slower; figures may be low; re-run on a quiet host.") in out.splitlines()
    assert out.splitlines()[-1].startswith("Summary: 0 faster, 0 slower, 3 inconclusive")
    assert "spread too much" not in out  # a busy host alone: the busy note says why, not the runs' spread
    rows = cmp.compare(cmp.load_results(a), cmp.load_results(b / "results.json"))  # results.json given: the same
    assert [r.verdict for r in rows].count(cmp.INCONCLUSIVE) == 3


def test_a_run_json_that_is_not_json_is_named(tmp_path):
    a, _b = _runs(tmp_path)
    (a / "run.json").write_text("{not json")
    with pytest.raises(InputError, match=f"^{a / 'run.json'}: not JSON"):
        cmp.load_results(a)
