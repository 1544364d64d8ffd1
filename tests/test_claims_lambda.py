"""Lambda's published H100/A100 PyTorch figures (kit/claims/lambda.yaml) against their raw logs.

The fixtures (tests/fixtures/published-logs/lambda/, see its README) hold Lambda's CSVs, its method script and the
logs behind the figures. Here: the claims check through the real CLI with only match/flagged verdicts and the counts
the claims file's header states; every H100/A100 CSV figure with a published log has its claim (computed from the
CSVs and Lambda's own row -> folder map, so none can be dropped silently); Lambda's rule itself, run on the copied
logs, gives every figure; what the parsers read from each log, pinned (parse-golden.json.gz; regenerate, only when
a change in what is parsed is intended, with `.venv/bin/python tests/test_claims_lambda.py`); cut logs refused.
"""

from __future__ import annotations

import ast
import csv
import gzip
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kit.core.yamlio import ConfigError  # noqa: E402
from kit.results.crosscheck import ERROR, FLAGGED, MATCH, check_claims  # noqa: E402
from kit.results.parsers import FORMATS, ParseError, detect_format, parse_log, parse_text  # noqa: E402
from kit.results.parsers.lambda_dle_pytorch import LAMBDA_DLE_FORMATS  # noqa: E402
from kit.results.parsers.logtext import read_log_text  # noqa: E402

CLAIMS = REPO / "kit" / "claims" / "lambda.yaml"
ROOT = REPO / "tests" / "fixtures" / "published-logs" / "lambda"
PYTORCH = ROOT / "pytorch"
GOLDEN = ROOT / "parse-golden.json.gz"
PRECISIONS = ("fp32", "fp16")
# the kit's reader of each model's log (the claims name it; see the claims file's header)
MODEL_FORMAT = {"resnet50": "dle-pytorch", "bert_base_squad": "dle-bert-pytorch", "bert_large_squad": "dle-bert-pytorch",
                "ncf": "dle-pytorch", "ssd": "dle-ssd-pytorch", "gnmt": "dle-gnmt-pytorch",
                "transformerxlbase": "dle-transformerxl-pytorch", "transformerxllarge": "dle-transformerxl-pytorch",
                "tacotron2": "dle-tts-pytorch", "waveglow": "dle-tts-pytorch"}


@cache
def lambda_tables() -> dict:
    """compile_results_pytorch.py's list_* tables (literals), read without running Lambda's script."""
    tree = ast.parse((PYTORCH / "scripts" / "compile_results_pytorch.py").read_text())
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.startswith("list_")}


def read_csv(name: str) -> list[dict]:
    with open(PYTORCH / name, newline="") as f:
        return list(csv.DictReader(f))


@cache
def cells() -> list[dict]:
    """Every figure of the CSVs' H100/A100 rows: its system folder (Lambda's map), test folder and batch."""
    tables = lambda_tables()
    systems = {**tables["list_system_single"], **tables["list_system_multiple"]}
    folder_of = {value[1]: key for key, value in systems.items()}
    found = []
    for precision in PRECISIONS:
        tests = tables[f"list_test_{precision}"][1]  # version 1: every system here (checked below)
        batches = {row["name_gpu"]: row for row in read_csv(f"pytorch-train-bs-{precision}.csv")}
        for row in read_csv(f"pytorch-train-throughput-{precision}.csv"):
            if "H100" not in row["name_gpu"] and "A100" not in row["name_gpu"]:
                continue
            system = folder_of[row["name_gpu"]]
            assert systems[system][0][0] == 1 and float(row["num_gpu"]) == systems[system][0][1], system
            for test, (column, regex, field) in sorted(tests.items()):
                found.append({"system": system, "test": test, "column": column, "precision": precision,
                              "gpus": systems[system][0][1], "published": float(row[column]),
                              "batch": int(batches[row["name_gpu"]][column]), "regex": regex, "field": field,
                              "folder": f"results/{system}/{test}"})
    return found


def not_copied() -> dict[str, list[str]]:
    """NOT-COPIED.txt: folder -> the logs left out for size."""
    folders: dict[str, list[str]] = {}
    for line in (ROOT / "NOT-COPIED.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            path, size, digest = line.split()
            assert int(size) > 0 and len(digest) == 64
            folders.setdefault(path.rsplit("/", 1)[0], []).append(path)
    return folders


def claims() -> list[dict]:
    return yaml.safe_load(CLAIMS.read_text())["logs"]


def claim_folder(claim: dict) -> str:
    files = claim["files"] if "files" in claim else [claim["file"]]
    folders = {(CLAIMS.parent / f).resolve().parent.relative_to(PYTORCH).as_posix() for f in files}
    assert len(folders) == 1, files
    return folders.pop()


def header_counts() -> dict[str, int]:
    header = CLAIMS.read_text().split("\nlogs:", 1)[0]
    m = re.search(r"(\d+) CSV figures in the (\d+) H100/A100 rows .*?: (\d+) claims, (\d+) match, (\d+) flagged; "
                  r"(\d+) not parsed", header.replace("\n# ", " "))
    assert m, "the claims file's header no longer states its counts"
    figures, rows, n, match, flagged, unparsed = map(int, m.groups())
    zero = int(re.search(r"#   (\d+) figures printed as 0", header)[1])
    uncopied = int(re.search(r"#   (\d+) SSD figures whose logs were not copied", header)[1])
    return {"figures": figures, "rows": rows, "claims": n, "match": match, "flagged": flagged,
            "unparsed": unparsed, "zero": zero, "uncopied": uncopied}


def test_the_claims_check_through_the_cli_with_the_headers_counts():
    r = subprocess.run([sys.executable, "-m", "kit", "crosscheck", "kit/claims/lambda.yaml", "--json"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    counts = header_counts()
    statuses = [v["status"] for v in report["verdicts"]]
    assert set(statuses) <= {MATCH, FLAGGED}
    assert report["counts"] == {"match": counts["match"], "flagged": counts["flagged"], "mismatch": 0, "error": 0}
    assert len(statuses) == counts["claims"] == counts["match"] + counts["flagged"]
    plain = subprocess.run([sys.executable, "-m", "kit", "crosscheck", "kit/claims/lambda.yaml"], cwd=REPO,
                           capture_output=True, text=True)
    assert plain.returncode == 0 and plain.stdout.rstrip().endswith(
        f"{counts['match']} match, {counts['flagged']} flagged (published figures that do not derive from their "
        f"logs, as the claims file declares), 0 mismatch, 0 error of {counts['claims']} claims")


def test_every_h100_a100_figure_with_a_published_log_has_its_claim():
    counts, uncopied, by_folder = header_counts(), not_copied(), {}
    for claim in claims():
        folder = claim_folder(claim)
        assert folder not in by_folder, f"two claims for {folder}"
        by_folder[folder] = claim
    zero = left_out = 0
    for cell in cells():
        folder, published = cell["folder"], cell["published"]
        logs = sorted(p.name for p in (PYTORCH / folder).glob("*.txt"))
        para = (PYTORCH / folder / "benchmark.para").read_text().split()
        assert para[:2] == ["GLOBAL_BATCH", str(cell["batch"])] and para[2:4] == ["GPU", str(cell["gpus"])], folder
        if folder in uncopied:  # left out for size, listed with its sha256
            assert not logs and published > 0 and folder not in by_folder, folder
            left_out += 1
            continue
        assert logs, f"{folder}: the figure's log is missing from the fixtures"
        if published == 0:  # Lambda's script writes 0 where no log gives a figure: the kit refuses every such log
            assert folder not in by_folder, folder
            for name in logs:
                with pytest.raises(ParseError, match="no throughput line"):
                    parse_log(PYTORCH / folder / name, MODEL_FORMAT[cell["column"]])
            zero += 1
            continue
        claim = by_folder.pop(folder, None)
        assert claim is not None, f"{folder}: published {published:g}, no claim in {CLAIMS.name}"
        files = claim["files"] if "files" in claim else [claim["file"]]
        assert sorted(Path(f).name for f in files) == logs, folder  # every run Lambda averaged
        assert (claim["published"], claim["batch"], claim["gpus"]) == (published, cell["batch"], cell["gpus"])
        assert claim["format"] == MODEL_FORMAT[cell["column"]], folder
    assert not by_folder, f"claims of no H100/A100 CSV figure: {sorted(by_folder)}"
    assert len(cells()) == counts["figures"] == counts["rows"] * 20
    assert (zero, left_out) == (counts["zero"], counts["uncopied"])
    assert counts["claims"] + zero + left_out + counts["unparsed"] == counts["figures"]


def lambda_rule(cell: dict) -> int:
    """gather_throughput() of compile_results_pytorch.py on the copied logs, as Lambda wrote it."""
    pattern, count, total = re.compile(cell["regex"]), 0.000000001, 0.0
    for log in sorted((PYTORCH / cell["folder"]).glob("*.txt")):
        throughput = 0.0
        for line in log.read_text(errors="replace").splitlines():
            for match in pattern.finditer(line):
                try:
                    throughput = float(match.group().split(" ")[cell["field"]])
                except (ValueError, IndexError):
                    pass
        if throughput > 0:
            count += 1
            total += throughput
    return int(round(total / count, 2))


def test_lambdas_own_rule_on_the_copied_logs_gives_every_figure():
    """The logs copied are the ones behind the CSVs: Lambda's rule on them reprints every figure."""
    checked = [cell for cell in cells() if cell["folder"] not in not_copied()]
    assert [c["folder"] for c in checked if lambda_rule(c) != c["published"]] == []
    assert len(checked) == header_counts()["claims"] + header_counts()["zero"]


# --- the parsers: one golden per copied log, a few records spelled out, cut logs refused ---

def fixture_logs() -> list[Path]:
    return sorted(PYTORCH.glob("results/*/PyTorch_*/*.txt"))


def model_format(path: Path) -> str:
    test = path.parent.name
    return next(fmt for model, fmt in MODEL_FORMAT.items() if f"_{model}_" in f"_{test.lower()}_")


def _outcome(read) -> dict:
    try:
        parsed = read()
    except ParseError as exc:
        return {"error": str(exc)}
    records = [list(r) for r in parsed.records]
    digest = hashlib.sha256(json.dumps(records, separators=(",", ":")).encode()).hexdigest()
    return {"format": parsed.format.name, "n": len(records), "sha256": digest, "last": records[-1]}


def observe(path: Path) -> dict:
    rel = path.relative_to(PYTORCH)  # errors name the file as the golden does, on any machine
    text = read_log_text(path)
    return {"auto": _outcome(lambda: parse_text(text, rel)),
            "claim": _outcome(lambda: parse_text(text, rel, model_format(path)))}


def test_the_golden_covers_every_copied_log():
    golden = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    assert sorted(golden) == [p.relative_to(PYTORCH).as_posix() for p in fixture_logs()]
    assert len(golden) == 730 and sum("error" in g["claim"] for g in golden.values()) == 80


@pytest.mark.parametrize("model", sorted(set(MODEL_FORMAT)))
def test_every_copied_log_reads_as_the_golden_says(model):
    golden = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    paths = [p for p in fixture_logs() if f"_{model}_" in f"_{p.parent.name.lower()}_"]
    assert paths
    changed = {p.relative_to(PYTORCH).as_posix(): observe(p) for p in paths}
    changed = {k: v for k, v in changed.items() if v != golden[k]}
    assert not changed, f"{len(changed)} logs read differently, e.g. {next(iter(changed.items()))}"


def _records(rel: str, fmt: str):
    return parse_log(PYTORCH / "results" / rel, fmt).records


def test_the_new_formats_read_their_lines():
    ssd = _records("H100_80GB_SXM5_v1/PyTorch_SSD_FP32/14-02-2023_05-37-40.txt", "dle-ssd-pytorch")
    assert [(r.metric, r.value, r.kind, r.line) for r in ssd] == [
        ("average_images_per_sec", 524.231, "summary", 1522), ("median_images_per_sec", 524.283, "summary", 1522)]
    gnmt = _records("8xH100_80GB_SXM5_v1/PyTorch_gnmt_FP32/14-02-2023_07-23-50.txt", "dle-gnmt-pytorch")
    assert [(r.value, r.epoch, r.rank, r.kind, r.unit) for r in gnmt] == [
        (1637020.0, 0, 0, "per-epoch", "tokens/s"), (1655944.0, 1, 0, "per-epoch", "tokens/s")]
    txl = _records("8xH100_80GB_SXM5_v1/PyTorch_transformerxlbase_FP16/14-02-2023_07-31-17.txt",
                   "dle-transformerxl-pytorch")
    assert (txl[0].metric, txl[0].value, txl[0].step, txl[0].epoch) == ("tok/s", 196325.0, 10, 1)
    assert (txl[-1].metric, txl[-1].value, txl[-1].kind, txl[-1].line) == (
        "training_throughput", 497053.82, "summary", 228)
    tts = _records("H100_80GB_SXM5_v1/PyTorch_waveglow_FP32/14-02-2023_05-36-21.txt", "dle-tts-pytorch")
    assert [(r.kind, r.value) for r in tts[-3:]] == [
        ("per-step", 386705.70440584054), ("per-epoch", 360558.7583777193), ("summary", 360558.7583777193)]
    assert (tts[-3].epoch, tts[-3].step, tts[-2].epoch, tts[-2].step) == (1, 18, 1, None)


def test_the_new_formats_claim_no_other_log(published):
    """No shared published fixture (other publishers' logs) is detected as one of them, nor read by them."""
    files = [p for p in sorted(published.rglob("*")) if p.is_file() and p.suffix not in (".md", ".yaml")]
    assert len(files) > 100
    for path in files:
        text = read_log_text(path)
        assert not [f.name for f in LAMBDA_DLE_FORMATS if f.detect(text)], path
        assert detect_format(text, path).name not in {f.name for f in LAMBDA_DLE_FORMATS}, path
    assert {f.name for f in LAMBDA_DLE_FORMATS} <= set(FORMATS)


CUT_CASES = [("H100_80GB_SXM5_v1/PyTorch_SSD_AMP/14-02-2023_05-24-17.txt", "dle-ssd-pytorch", "Median images/sec: "),
             ("H100_80GB_SXM5_v1/PyTorch_gnmt_FP16/14-02-2023_05-44-32.txt", "dle-gnmt-pytorch", "Training: "),
             ("H100_80GB_SXM5_v1/PyTorch_transformerxllarge_FP32/14-02-2023_05-16-48.txt",
              "dle-transformerxl-pytorch", "Training throughput: "),
             ("H100_80GB_SXM5_v1/PyTorch_tacotron2_FP16/14-02-2023_05-06-09.txt", "dle-tts-pytorch",
              "() train_items_per_sec : ")]


@pytest.mark.parametrize(("rel", "fmt", "marker"), CUT_CASES)
def test_a_cut_log_is_refused_never_read_as_zero(tmp_path, rel, fmt, marker):
    text = read_log_text(PYTORCH / "results" / rel)
    at = text.rindex(marker) + len(marker)
    for cut in (text[: at + 2], text[:at]):  # inside the last figure's number, and right before it
        with pytest.raises(ParseError, match=r"log cut mid-line") as info:
            parse_text(cut, "cut.txt", fmt)
        assert str(info.value).startswith("cut.txt:") and info.value.line == cut.count("\n") + 1
    with pytest.raises(ParseError, match="empty file"):
        (tmp_path / "empty.txt").write_text("")
        parse_log(tmp_path / "empty.txt", fmt)
    head = text[: text.index("\n", text.index("\n") + 1) + 1]  # its first two lines: no throughput line
    with pytest.raises(ParseError, match=f"no throughput line of format {fmt}"):
        parse_text(head, "head.txt", fmt)


def test_a_claim_on_a_cut_log_is_an_error_naming_the_file(tmp_path):
    """Cut at a line's end before the run's last figure: no summary line, so an error, not a smaller figure."""
    src = PYTORCH / "results" / "H100_80GB_SXM5_v1/PyTorch_transformerxlbase_FP32/14-02-2023_05-42-24.txt"
    text = src.read_text()
    (tmp_path / "cut.txt").write_text(text[: text.rindex("Training throughput: ")])
    (tmp_path / "claims.yaml").write_text(
        "logs:\n  - {file: cut.txt, format: dle-transformerxl-pytorch, method: {reduce: last_summary, trunc: 0}, "
        "published: 45697}\n")
    (verdict,) = check_claims(tmp_path / "claims.yaml")
    assert verdict.status == ERROR and verdict.recomputed is None
    assert verdict.detail.startswith(str(tmp_path / "cut.txt")) and "no summary line" in verdict.detail
    r = subprocess.run([sys.executable, "-m", "kit", "crosscheck", str(tmp_path / "claims.yaml")], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "cut.txt: no summary line" in r.stderr


def test_files_claims_average_the_runs_then_round(tmp_path):
    """`files:`: each run's figure unrounded, their mean, then the method's rounding (Lambda's rule)."""
    folder = PYTORCH / "results" / "LambdaCloud_H100_80GB_PCIe5_v1" / "PyTorch_resnet50_FP32"
    runs = sorted(p.name for p in folder.glob("*.txt"))
    values = [parse_log(folder / r, "dle-pytorch").records for r in runs]
    summaries = [[x.value for x in rs if x.kind == "summary" and x.metric == "train.compute_ips"][-1] for rs in values]
    rel = Path("../../tests/fixtures/published-logs/lambda/pytorch/results/LambdaCloud_H100_80GB_PCIe5_v1/"
               "PyTorch_resnet50_FP32")
    (tmp_path / "claims.yaml").write_text(textwrap.dedent(f"""\
        logs:
          - {{files: [{', '.join(str(folder / r) for r in runs)}], format: dle-pytorch, method: {{reduce: last_summary, metric: train.compute_ips, trunc: 0}}, published: {int(sum(summaries) / 4)}}}
          - {{files: [{folder / runs[0]}], format: dle-pytorch, method: {{reduce: last_summary, metric: train.compute_ips, trunc: 0}}, published: {int(summaries[0])}}}
        """))
    first, single = check_claims(tmp_path / "claims.yaml")
    assert first.status == MATCH and first.recomputed == int(sum(summaries) / 4) and len(runs) == 4
    assert "the mean of 4 runs' figures" in first.detail and first.claim.endswith(f"{runs[0]} (+3 runs)")
    assert single.status == MATCH and single.claim == str(folder / runs[0])
    assert rel.as_posix() in CLAIMS.read_text()  # the claims file averages this folder's runs too


@pytest.mark.parametrize(("entry", "message"), [
    ("{file: a.txt, files: [a.txt], published: 1}", "files: give file or files, not both"),
    ("{files: [], published: 1}", "files: expected a non-empty list of file names"),
    ("{files: [1, 2], published: 1}", "files: expected a non-empty list of file names"),
    ("{files: a.txt, published: 1}", "files: expected a list"),
    ("{file: a.txt, batch: 0, published: 1}", "batch: must be an integer >= 1"),
])
def test_malformed_files_and_batch_name_file_line_and_key(tmp_path, entry, message):
    path = tmp_path / "claims.yaml"
    path.write_text(f"logs:\n  - {{file: b.txt, published: 1}}\n  - {entry}\n")
    with pytest.raises(ConfigError) as info:
        check_claims(path)
    assert str(info.value).startswith(f"{path}:3: ") and message in str(info.value)


if __name__ == "__main__":  # write the golden (only when a change in what is parsed is intended)
    data = {p.relative_to(PYTORCH).as_posix(): observe(p) for p in fixture_logs()}
    GOLDEN.write_bytes(gzip.compress(json.dumps(data, sort_keys=True, separators=(",", ":")).encode(), 9, mtime=0))
    print(f"wrote {GOLDEN}: {len(data)} logs, {GOLDEN.stat().st_size / 1e3:.0f} kB")
