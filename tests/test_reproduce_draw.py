"""`kit reproduce --sample N`: the draw is made with a fresh seed from the system's randomness, printed and
recorded, so an operator cannot know before bundling which cases an auditor will re-run; `--seed` replays a draw.
The bundle is the H200 visit's (tests/fixtures/gpu-runs/h200-20261204-yardstick/ladder): on this CPU host nothing
runs (a GPU suite), so the draw is all there is to see."""

from __future__ import annotations

import re
import tarfile

from conftest import REPO

from kit.cli.main import main

LADDER = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261204-yardstick" / "ladder" / "run.tar.gz"
CASES = ("ngc-pytorch/resnet50/bz256/1n1g/amp", "torch/resnet50/bz256/1n1g/amp-nhwc")


def drawn(out: str) -> tuple[int, list[str]]:
    seed = int(re.search(r"--sample 1 drawn with seed (\d+) \(--seed \1 replays it\)", out)[1])
    return seed, [case for case in CASES if f"| {case} |" in out]


def test_a_sample_is_drawn_with_a_fresh_seed_and_replays_with_it(tmp_path, capsys):
    with tarfile.open(LADDER) as tar:
        tar.extract("run.bundle.tar.gz", tmp_path, filter="data")
    bundle = tmp_path / "run.bundle.tar.gz"
    draws = []
    for _ in range(6):
        assert main(["reproduce", str(bundle), "--sample", "1"]) == 3  # a GPU bundle here: not comparable
        draws.append(drawn(capsys.readouterr().out))
    seeds = {seed for seed, _ in draws}
    assert len(seeds) == 6, "each draw its own seed"  # 2^32 seeds: six alike would be a fixed one
    assert all(len(cases) == 1 for _, cases in draws)
    seed, cases = draws[0]
    for _ in range(2):
        assert main(["reproduce", str(bundle), "--sample", "1", "--seed", str(seed)]) == 3
        out = capsys.readouterr().out
        assert "drawn with seed" not in out and [c for c in CASES if f"| {c} |" in out] == cases
