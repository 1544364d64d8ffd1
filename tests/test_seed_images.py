"""Issue 20: each seed's environment as an image, chosen by a suite's or case's `image:`; a case whose program
cannot run in its image (PLSC imports paddle.fluid; Paddle >= 2.6 has none) is refused when the plan is made."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from kit.config import programs, suites
from kit.config.cases import Suite
from kit.images import build, parity
from kit.images.build import ImageError
from kit.images.spec import load_pins
from kit.run import plan as plan_mod

REPO = Path(__file__).resolve().parents[1]
PINS = load_pins()
H100_REFUSAL = ("PLSC imports paddle.fluid APIs that Paddle 2.5 removed; image paddle/h100 pins Paddle 2.6.2, which "
                "has none of them")

SUITE = """\
schema_version: 1
name: {name}
hardware: gpu
defaults: {{repeats: 1{image}}}
cases:
  - {{framework: paddle, model: arcface, batch_size: 128, impl: reference{case_image}}}
  - {{framework: paddle, model: vgg16, batch_size: 32, impl: reference}}
  - {{framework: paddle, model: arcface, batch_size: 128, impl: reference, nodes: 2, gpus_per_node: 8{case_image}}}
"""


def suite_file(tmp_path: Path, name: str = "h100", image: str = "", case_image: str = "") -> Suite:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SUITE.format(name=name, image=f", image: {image}" if image else "",
                                 case_image=f", image: {case_image}" if case_image else ""))
    return suites.load_suite(path)


class Host:
    def __init__(self, name: str, gpus: int = 8, runtime: str = "docker"):
        self.name, self.gpus, self.runtime, self.address = name, gpus, runtime, name


def test_plsc_and_fleetx_need_fluid_and_paddleclas_does_not():
    plsc, fleetx = programs.implementation("paddle", "arcface"), programs.implementation("paddle", "vgg16")
    assert plsc.needs_fluid and plsc.fluid_gone == (2, 5) and plsc.short == "PLSC"  # incubate.fleet, transpiler
    assert fleetx.needs_fluid and fleetx.fluid_gone == (2, 6)  # the fleetx package: paddle.fluid, framework, core
    assert not programs.implementation("paddle", "resnet50").needs_fluid


def test_h100_plan_refuses_plsc_with_the_reason():
    h100 = suites.load_suite("h100")
    runs, skipped = plan_mod.plan(h100, "/nonexistent-model-code")
    why = {c.key: reason for c, reason in skipped}
    plsc = [c for c in h100.cases if c.model == "arcface" and c.impl == "reference"]
    assert plsc and all(why[c.key] == H100_REFUSAL for c in plsc)
    assert not any(r.case.model == "arcface" and r.case.impl == "reference" for r in runs)
    # Paddle 2.5 retired the paddle.fluid APIs PLSC imports (incubate.fleet, transpiler): v100 runs PLSC in seed
    # 002's Paddle 1.8.5 image; a100's refuses it (CUDA 10.2 has no A100 code); the rest runs in Paddle 2.5
    v100, a100 = suites.load_suite("v100"), suites.load_suite("a100")
    assert not any(plan_mod.image_refusal(c, v100) for c in v100.cases if c.precision != "auto")
    assert {plan_mod.image_of(c, v100).key for c in v100.cases if c.model == "arcface" and c.impl == "reference"
            } == {"paddle/seed002"}
    refused = {c.key: plan_mod.image_refusal(c, a100) for c in a100.cases if c.precision != "auto"}
    assert {k: v for k, v in refused.items() if v} == {
        c.key: H100_REFUSAL.replace("h100", "a100").replace("2.6.2", "2.5.0")
        for c in a100.cases if c.model == "arcface" and c.impl == "reference"}


def test_fleetx_auto_parallel_needs_dali_and_v100_runs_it_in_seed000s_image():
    v100, a100 = suites.load_suite("v100"), suites.load_suite("a100")
    auto = [c for c in v100.cases if c.precision == "auto"]
    assert len(auto) == 16 and all(plan_mod.image_of(c, v100).key == "paddle/seed000" for c in auto)
    assert PINS.get("paddle/seed000").versions["dali"] == "0.24.0"
    assert not any(plan_mod.image_refusal(c, v100) for c in auto)
    refused = {plan_mod.image_refusal(c, a100) for c in a100.cases if c.precision == "auto"}
    assert refused == {"FleetX auto reads its data with DALI; image paddle/a100 pins no DALI (image: "
                       "paddle/seed000 (DALI 0.24.0))"}


def test_refusal_in_unfit_for_the_cluster_path():
    h100 = suites.load_suite("h100")
    case = next(c for c in h100.cases if c.model == "arcface" and c.nodes > 1)
    hosts = [Host(f"n{i}") for i in range(case.nodes)]
    assert plan_mod.unfit(case, hosts, "gpu", h100) == H100_REFUSAL
    assert plan_mod.unfit(case, hosts, "gpu") is None  # without the suite: the old checks only


def test_an_image_with_fluid_lifts_the_refusal(tmp_path):
    suite = suite_file(tmp_path, "h100", case_image="paddle/seed002")
    plsc = [c for c in suite.cases if c.model == "arcface"]
    assert all(plan_mod.image_refusal(c, suite) is None for c in plsc)
    assert all(plan_mod.image_of(c, suite).key == "paddle/seed002" for c in plsc)
    fleetx = next(c for c in suite.cases if c.model == "vgg16")
    assert plan_mod.image_of(fleetx, suite).key == "paddle/h100"  # no image: the suite's generation, as before
    assert plan_mod.image_refusal(fleetx, suite) == ("FleetX imports paddle.fluid APIs that Paddle 2.6 removed; image "
                                                     "paddle/h100 pins Paddle 2.6.2, which has none of them")
    _runs, skipped = plan_mod.plan(suite, "/nonexistent-model-code")
    assert [c.model for c, why in skipped if "paddle.fluid" in why] == ["vgg16"]  # PLSC's refusal lifted


def test_an_image_without_the_programs_code_is_refused(tmp_path):
    suite = suite_file(tmp_path, "h100", image="paddle/seed000")  # seed 000's image checks out FleetX only
    why = {c.model: plan_mod.image_refusal(c, suite) for c in suite.cases}
    assert why["vgg16"] is None
    assert why["arcface"] == "PLSC: image paddle/seed000 does not check out its code (plsc; it has fleetx)"


def test_no_pinned_image_no_refusal(tmp_path):
    suite = suite_file(tmp_path, "mycluster")  # not a generation and no image: nothing to check against
    assert all(plan_mod.image_of(c, suite) is None and plan_mod.image_refusal(c, suite) is None
               for c in suite.cases)


def test_dry_runs_show_the_refusal():
    from kit.run import dryrun
    from kit.run.local import LocalRunner

    h100 = suites.load_suite("h100")
    lines = dryrun.render(h100, LocalRunner(REPO / "runs" / "dry", model_code="/nonexistent"), None, "(none)")
    assert any(line.strip() == f"not run by `kit bench` on this host: {H100_REFUSAL}" for line in lines), lines
    cluster = "\n".join(dryrun.render_cluster(h100, dryrun.placeholder_hosts(4), "(test)"))
    assert H100_REFUSAL in cluster


# ---- the image a run uses --------------------------------------------------------------------


def test_images_by_framework_follow_the_cases_image(tmp_path):
    suite = suite_file(tmp_path, "h100", image="seed002")
    assert build.images_by_framework(PINS, suite, ["paddle"])["paddle"].key == "paddle/seed002"
    default = suites.load_suite("h100")
    assert build.images_by_framework(PINS, default, ["paddle", "torch"]) == {
        "paddle": PINS.get("paddle/h100"), "torch": PINS.get("pytorch/h100")}


def test_one_image_per_framework_per_run(tmp_path):
    suite = suite_file(tmp_path, "h100", case_image="paddle/seed002")  # PLSC in seed002, FleetX in h100
    with pytest.raises(ImageError, match="paddle cases of suite h100 run in 2 images"):
        build.images_by_framework(PINS, suite, ["paddle"])
    plsc = [c for c in suite.cases if c.model == "arcface"]
    assert build.images_by_framework(PINS, suite, ["paddle"], plsc)["paddle"].key == "paddle/seed002"


def test_cudnn_parity_reads_the_cases_images(tmp_path):
    suite = suite_file(tmp_path, "h100", case_image="paddle/seed002")
    assert parity.cudnn_of(suite) == {"paddle (paddle/h100)": ("paddle/h100", "8.9"),
                                      "paddle (paddle/seed002)": ("paddle/seed002", "7.6.5")}
    assert parity.cudnn_of(suites.load_suite("h100"))["paddle"] == ("paddle/h100", "8.9")


# ---- the self-check reads a Paddle's commit --------------------------------------------------


def test_verify_pins_reads_paddle_commit(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("verify_pins_seed", REPO / "scripts" / "verify_pins.py")
    vp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vp)
    fake = types.ModuleType("paddle")
    fake.version = types.SimpleNamespace(commit="b6711e24ea5e17fa24e9b1ba516fe03186dd4a2c")
    monkeypatch.setitem(sys.modules, "paddle", fake)
    assert vp.main(["--expect", "paddle_commit=b6711e24ea5e17fa24e9b1ba516fe03186dd4a2c"]) == 0
    assert vp.main(["--expect", "paddle_commit=0000000000000000000000000000000000000000"]) == 1
    assert "MISMATCH version paddle_commit" in capsys.readouterr().out
