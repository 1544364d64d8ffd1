"""The contract between a suite's case and the harness: each case key, the train.py flag that carries it, the
run_start field that states what ran, and how the kit's verify compares them. One table, read by both sides:
the kit builds a case's command (kit.run.command.harness_args), keeps its settings in run.json
(kit.run.records.run_settings) and checks a log against its case (kit.audit.rules.predicates) by iterating it;
train.py takes every flag it names (cli.py builds them from it) and states every field (run_start.py). Standard
library only (it travels with the harness; the kit loads this file by its path, kit.core.catalogue).

A row is everything a key is: its kind, bounds, default (and how a suite resolves an absent value), choices, whether
it names the log (its tag) and selects references. The kit's suite table (kit.config.case_keys), the Case's keys
(kit.config.cases) and the log-name tags (kit.core.layout) derive from the rows. MATH is what each precision means,
read by precision.py (which sets it), the kit's suite checks and verify (closed._math_problems).
"""

from __future__ import annotations

from dataclasses import dataclass

ALWAYS, SET, CHANGED = "always", "set", "changed"  # when the kit gives the flag: always; when the case has a value;
# when the value differs from the harness's default
ALL, IMAGE, NLP, SEED003 = "all", "image", "nlp", "seed003"  # the models a key applies to: all; those timed per
# step; those per epoch; seed 003's (catalogue.Model.family)


@dataclass(frozen=True)
class Math:
    """What a precision means: the one table (precision.py sets it, verify's closed world reads it)."""
    tf32: bool  # TF32 allowed for FP32 convolutions and matmuls
    autocast: str | None  # the autocast dtype ("float16", "bfloat16"), None: no autocast
    loss_scaling: bool
    held: bool = True  # verify holds a log's autocast to this: the dtype on a GPU, none elsewhere (False: not held,
    # as bf16's CPU autocast depends on the framework). Verify's rules read this: changing a row is a new predicate


# fp32: no TF32 anywhere (NVIDIA_TF32_OVERRIDE=0 too); amp and bf16 allow TF32 for what autocast leaves in FP32
MATH = {
    "fp32": Math(tf32=False, autocast=None, loss_scaling=False),
    "tf32": Math(tf32=True, autocast=None, loss_scaling=False),
    "amp": Math(tf32=True, autocast="float16", loss_scaling=True),
    "bf16": Math(tf32=True, autocast="bfloat16", loss_scaling=False, held=False),
}
MODEL, SUITE = "model", "suite"  # how a suite resolves an absent value (resolve=): from the model's catalogue row;
# by the kit per case and suite (kit.config.case_entries: the layout and the loader by hardware)


@dataclass(frozen=True)
class Setting:
    key: str  # the suite's case key (and the Case attribute)
    flag: str  # train.py's flag
    start: str  # the run_start field that states the value the run had
    kind: type = int
    default: object = None  # train.py's value when the flag is not given (None: per model, or required)
    choices: tuple = ()  # the values train.py accepts (empty: any of its kind)
    scope: str = ALL
    given: str = ALWAYS
    checked: int = 0  # from this version of verify's case check on (harness_log_states_its_case@N, which a new rule
    # set names: a predicate's version, not a rule set's number), run_start's field and the recorded flag must be the
    # case's value; 0: never compared
    recorded: bool = False  # run.json keeps the case's value beside what the log says ran (records.run_settings)
    minimum: int | None = None  # a suite's value must lie within minimum..maximum (both or neither)
    maximum: int | None = None
    required: bool = False  # a suite's case must give it
    resolve: str = ""  # an absent value in a suite: "" default; MODEL or SUITE (then the suite's default is None)
    tag: str = ""  # the word a value other than the default adds to the log's name ("{}": the value; "{}load")
    tag_rank: int = 0  # where that word goes after the precision (1, 2, ...); with tag
    selects: bool = False  # a suite's reference may select cases by it

    def applies(self, model) -> bool:
        """Whether the key applies to MODEL (a catalogue.Model)."""
        if self.scope == SEED003:
            return model.family == "seed003"
        return self.scope == ALL or (self.scope == NLP) == model.epochs

    def gives(self, value) -> bool:
        """Whether the kit puts the flag on the command line for this value."""
        return self.given == ALWAYS or (self.given == SET and bool(value)) or (
            self.given == CHANGED and value is not None and value != self.default)


# in the order of the command line; --data's value is the train list where the case reads ImageNet
SETTINGS = (
    Setting("framework", "--framework", "framework", str, checked=1, required=True, selects=True),
    Setting("model", "--model", "model", str, checked=1, required=True, selects=True),
    Setting("batch_size", "--batch-size", "local_batch", checked=1, minimum=1, maximum=65536, required=True,
            selects=True),
    Setting("precision", "--precision", "precision", str, "fp32", tuple(MATH), checked=1, recorded=True,
            selects=True),
    Setting("seq_len", "--seq-len", "seq_len", scope=NLP, given=SET, checked=3, minimum=8, maximum=8192),
    Setting("corpus_size", "--corpus-size", "corpus_size", scope=NLP, given=SET, checked=3, minimum=1,
            maximum=100_000_000),
    Setting("measure_epochs", "--measure-epochs", "measure_epochs", default=1, scope=NLP, checked=3, minimum=1,
            maximum=1000),
    Setting("image_size", "--image-size", "image_size", scope=IMAGE, checked=1, minimum=8, maximum=4096,
            resolve=MODEL),
    Setting("num_classes", "--num-classes", "num_classes", scope=IMAGE, given=SET, checked=3, minimum=1,
            maximum=10_000_000, resolve=MODEL),
    Setting("size", "--size", "size", str, "full", ("full", "tiny"), scope=SEED003, given=CHANGED, checked=3),
    Setting("warmup_steps", "--warmup-steps", "warmup_steps", default=20, checked=3, minimum=0, maximum=1_000_000),
    Setting("measure_steps", "--measure-steps", "measure_steps", default=100, scope=IMAGE, checked=3, minimum=1,
            maximum=10_000_000),
    Setting("data", "--data", "data", str, "synthetic"),
    Setting("loader", "--loader", "loader", str, None, ("cpu", "gpu", "dali"), given=SET, checked=2,
            recorded=True, resolve=SUITE, tag="{}load", tag_rank=3, selects=True),
    Setting("layout", "--layout", "layout", str, "nchw", ("nchw", "nhwc"), scope=IMAGE, given=CHANGED, checked=1,
            recorded=True, resolve=SUITE, tag="{}", tag_rank=1, selects=True),
    Setting("mode", "--mode", "mode", str, "eager", ("eager", "compiled"), given=CHANGED, checked=1,
            recorded=True, tag="{}", tag_rank=2, selects=True),
)
BY_KEY = {s.key: s for s in SETTINGS}


def check_versions(settings) -> tuple[int, ...]:
    """The versions of verify's case check the settings' checked= values name: 1, 2, ... with none skipped (a
    skipped one would register a version identical to the one before it)."""
    versions = tuple(sorted({s.checked for s in settings if s.checked}))
    skipped = next((n for n in range(1, len(versions) + 1) if n not in versions), None)
    if skipped is not None:
        raise ValueError(f"contract: checked= values {versions} skip a version: each is a version of verify's case "
                         f"check (harness_log_states_its_case@N), the next being {skipped}, not a rule set's number")
    return versions


CHECK_VERSIONS = check_versions(SETTINGS)


def check_rows(settings) -> None:
    """What a row must say together: both bounds or neither, on an int key; a tag with its own rank."""
    ranks = [s.tag_rank for s in settings if s.tag]
    for s in settings:
        if (s.minimum is None) != (s.maximum is None) or (s.minimum is not None and s.kind is not int):
            raise ValueError(f"contract: {s.key}: minimum and maximum go together, on an int key")
        if bool(s.tag) != bool(s.tag_rank) or (s.tag and "{}" not in s.tag):
            raise ValueError(f"contract: {s.key}: a tag holds '{{}}' and comes with its tag_rank (1, 2, ...)")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"contract: two tags share a tag_rank ({sorted(ranks)})")


check_rows(SETTINGS)
