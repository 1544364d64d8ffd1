"""The harness's catalogue (scripts/harness/catalogue.py) and its contract with a suite's cases (contract.py): written
once, read by the kit and by the harness; the command, run.json's settings and verify's checks all come from them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kit.audit.rules import predicates
from kit.config import case_keys, suites
from kit.config.cases import EXTRA_KEYS, Case
from kit.core import layout
from kit.core.catalogue import contract, harness
from kit.run.command import harness_args

HARNESS = Path(__file__).resolve().parents[1] / "scripts" / "harness"


def harness_cli():
    """scripts/harness/cli.py imported as the harness imports it (its folder on sys.path; no framework loads)."""
    import sys
    if str(HARNESS) not in sys.path:
        sys.path.insert(0, str(HARNESS))
    import cli
    return cli


def assigned(path: Path, name: str):
    """The literal a harness module assigns to NAME (read, not imported: the frameworks need not load)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} assigns no {name}")


def test_the_kit_and_the_harness_read_one_catalogue():
    assert case_keys.MODELS == harness.NAMES and case_keys.NLP_MODELS == harness.NLP == ("bert", "transformer")
    assert case_keys.SEED003_MODELS == harness.SEED003 and case_keys.IMAGENET_MODELS == case_keys.NHWC_MODELS == (
        "resnet50", "vgg16", "arcface")
    assert set(case_keys.COMPILABLE) == set(harness.NAMES) - set(harness.NOT_COMPILABLE)
    assert case_keys.DEFAULT_IMAGE_SIZE["arcface"] == 112 and case_keys.DEFAULT_NUM_CLASSES["arcface"] == 93431
    for name in ("backend.py", "cli.py", "model_specs.py", "run_start.py"):  # the harness reads it
        assert "from catalogue import" in (HARNESS / name).read_text(), name
    for path in HARNESS.glob("*.py"):  # and holds no list of the models of its own
        if path.name != "catalogue.py":
            assert '"resnet50", "vgg16"' not in path.read_text(), path.name
    for framework in ("torch", "paddle"):  # each framework's model files build exactly the catalogue's models
        seed003 = ast.parse((HARNESS / f"{framework}_seed003.py").read_text())
        built = [n.value for n in ast.walk(seed003) if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", None) == "SEED003"][0]
        assert tuple(k.value for k in built.keys) == harness.SEED003


def test_every_contract_key_is_a_suite_key_and_a_flag_train_py_takes():
    parser = harness_cli().build_parser()
    flags = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for setting in contract.SETTINGS:
        assert setting.key in case_keys.CASE_KEYS and setting.key in Case.__dataclass_fields__, setting.key
        action = flags[setting.flag]  # train.py's parser is built from the table: its flag, name and default
        assert (action.dest, action.default) == (setting.key, setting.default), setting.flag
        if setting.choices:
            assert tuple(action.choices) == setting.choices, setting.flag
    assert EXTRA_KEYS == ()  # every key of today's table is a field of Case's own too


def test_the_suites_table_and_the_log_names_derive_from_the_contracts_rows():
    for st in contract.SETTINGS:  # each row reaches the suite's table as it says, or as the kit resolves it
        assert case_keys.CASE_KEYS[st.key] == ((st.kind,), None if st.resolve else st.default), st.key
        assert (st.key in case_keys.REQUIRED) == st.required, st.key
        assert (case_keys.MINIMUM.get(st.key), case_keys.MAXIMUM.get(st.key)) == (st.minimum, st.maximum), st.key
        assert (st.key in case_keys.SELECTOR_KEYS) == st.selects, st.key
        if st.choices:  # the suite's choices hold the contract's (the precisions: the programs' modes too)
            assert set(st.choices) <= set(case_keys.CHOICES[st.key]), st.key
        if st.resolve == contract.MODEL:  # filled from the catalogue's field of the same name
            assert all(hasattr(m, st.key) for m in harness.CATALOGUE), st.key
        assert st.key in Case.__dataclass_fields__ or st.key in EXTRA_KEYS, st.key
    assert set(case_keys.ORDER) == set(case_keys.CASE_KEYS)  # the expansion order names every key, once
    assert len(case_keys.ORDER) == len(set(case_keys.ORDER))
    for word, (key, value) in layout.TAG_SUFFIXES.items():  # each word is its row's, and round-trips
        assert layout.split_tag(layout.variant_tag("amp", **{key: value})) == {"precision": "amp", key: value}, word
    tagged = [st.key for st in layout.TAGGED]
    assert tagged == sorted(tagged, key=lambda k: contract.BY_KEY[k].tag_rank)
    with pytest.raises(ValueError, match="minimum and maximum go together"):
        contract.check_rows([contract.Setting("x", "--x", "x", minimum=1)])
    with pytest.raises(ValueError, match="share a tag_rank"):
        contract.check_rows([contract.Setting(k, "--" + k, k, str, tag="{}", tag_rank=1) for k in ("a", "b")])


def test_each_precisions_meaning_is_written_once():
    """The contract's MATH: the harness sets it (precision.py), the suite's choices and verify's math check read it."""
    assert contract.BY_KEY["precision"].choices == tuple(contract.MATH) == case_keys.HARNESS_PRECISIONS
    assert case_keys.AUTOCAST == tuple(p for p, m in contract.MATH.items() if m.autocast)
    harness_cli()  # the harness's folder on sys.path, as train.py has it
    import contract as harness_contract
    import precision
    assert precision.MODES is harness_contract.MATH and precision.PRECISIONS == tuple(contract.MATH)


@pytest.mark.parametrize(("suite", "key", "want"), [
    ("gpu1", "torch/resnet50/bz256/1n1g/amp-nhwc-compiled",
     "--framework torch --model resnet50 --batch-size 256 --precision amp --image-size 224 --num-classes 1000 "
     "--warmup-steps 20 --measure-steps 60 --data synthetic --device auto --layout nhwc --mode compiled --threads 4"),
    ("gpu1", "torch/bert/bz32/1n1g/amp",
     "--framework torch --model bert --batch-size 32 --precision amp --seq-len 128 --corpus-size 2048 "
     "--measure-epochs 1 --warmup-steps 20 --data synthetic --device auto --threads 4"),
    ("seed003", "torch/cyclegan/bz1/1n1g/fp32",
     "--framework torch --model cyclegan --batch-size 1 --precision fp32 --image-size 32 --warmup-steps 3 "
     "--measure-steps 10 --data synthetic --device auto --threads 4"),
])
def test_the_command_line_is_the_contracts_in_its_order(suite, key, want):
    case = {c.key: c for c in suites.load_suite(suite).cases}[key]
    assert " ".join(harness_args(case, 4)) == want


def test_verify_checks_what_the_contract_marks_checked():
    cases = {c.key: c for c in suites.load_suite("gpu1").cases}
    nhwc, bert = cases["torch/resnet50/bz256/1n1g/amp-nhwc"], cases["torch/bert/bz32/1n1g/amp"]
    assert predicates._declared_start(nhwc) == {
        "framework": "torch", "model": "resnet50", "local_batch": 256, "precision": "amp", "image_size": 224,
        "num_classes": 1000, "warmup_steps": 20, "measure_steps": 60, "layout": "nhwc", "mode": "eager", "ranks": 1}
    assert predicates._declared_start(bert) == {  # no image size or layout for a sequence model
        "framework": "torch", "model": "bert", "local_batch": 32, "precision": "amp", "seq_len": 128,
        "corpus_size": 2048, "measure_epochs": 1, "size": "full", "warmup_steps": 20, "mode": "eager", "ranks": 1}
    assert predicates._declared_flags(nhwc) == {
        "--framework": "torch", "--model": "resnet50", "--batch-size": "256", "--precision": "amp",
        "--image-size": "224", "--num-classes": "1000", "--warmup-steps": "20", "--measure-steps": "60",
        "--layout": "nhwc", "--mode": "eager"}
    # a flag the kit leaves out at its default reads as train.py's default
    ran = predicates._harness_flags(harness_args(cases["torch/resnet50/bz256/1n1g/amp"]))
    assert (ran["--layout"], ran["--mode"]) == ("nchw", "eager")
