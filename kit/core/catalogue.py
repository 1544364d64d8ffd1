"""The harness's model catalogue and its contract with a suite's cases (scripts/harness/catalogue.py, contract.py),
read from their files: the harness travels alone to every host and imports them there; the kit reads the same
files here, so a model's facts and a case key's path to the command line, the log and verify are written once.

    from kit.core.catalogue import contract, harness
    harness.MODELS["arcface"].image_size     # 112
    contract.BY_KEY["layout"].flag           # --layout
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parents[2] / "scripts" / "harness"


def load(name: str, folder: str = "harness"):
    """scripts/<folder>/<name>.py as the module kit_<folder>_<name> (the scripts' own names are too plain to share
    the kit's namespace): what runs on hosts, written once and read by the kit too."""
    qualified = f"kit_{folder}_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, HARNESS_DIR.parent / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def harness_sha256() -> dict[str, str]:
    """The sha256 of each harness file (run.json records them; verify compares them with its own)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(HARNESS_DIR.glob("*.py"))}


harness = load("catalogue")
contract = load("contract")
CORPUS_FILES = ("synthetic.py", "model_specs.py", "catalogue.py")  # what corpus_batches runs of the harness


def corpus_batches(model: str, size: str, corpus_size: int, local_batch: int, seq_len: int, seed: int,
                   world: int) -> list[tuple[int, int]]:
    """(sequences, tokens) of each batch of an NLP run's synthetic corpus, in training order, as the harness makes
    it (scripts/harness/synthetic.py, the vocabulary of model_specs' configuration of SIZE): every epoch's steps.
    ValueError where the harness refuses the arguments."""
    saved = sys.modules.get("catalogue")
    sys.modules["catalogue"] = harness  # the harness files import it by its plain name
    try:
        synthetic, specs = load("synthetic"), load("model_specs")
    finally:
        if saved is None:
            sys.modules.pop("catalogue", None)
        else:
            sys.modules["catalogue"] = saved
    vocab = specs.seed003_config(model, size)["vocab"]
    make = synthetic.bert_corpus if model == "bert" else synthetic.transformer_corpus
    return [(b.sequences, b.tokens) for b in make(corpus_size, local_batch, seq_len, vocab, seed, 0, world)]

# units that count a model's samples, however a log names them
SAMPLE_UNITS = ("samples/s", "images/s", "img/s", "imgs/s", "sequences/s")


def quantity_unit(model: str, unit: str) -> str:
    """One name per quantity: a figure counting a catalogued model's samples, under whatever name its log gives them,
    in the model's own unit (images/s, sequences/s; the catalogue's); any other unit (tokens/s, words/s, steps/s) as
    it is."""
    row = harness.MODELS.get(model)
    return row.unit if row is not None and unit in SAMPLE_UNITS and row.unit in SAMPLE_UNITS else unit
