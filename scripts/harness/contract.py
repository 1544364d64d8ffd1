"""The contract between a suite's case and the harness: each case key, the train.py flag that carries it, the
run_start field that states what ran, and how the kit's verify compares them. One table, read by both sides:
the kit builds a case's command (kit.run.command.harness_args), keeps its settings in run.json
(kit.run.records.run_settings) and checks a log against its case (kit.audit.rules.predicates) by iterating it;
train.py takes every flag it names (cli.py builds them from it) and states every field (run_start.py). Standard
library only (it travels with the harness; the kit loads this file by its path, kit.core.catalogue).
"""

from __future__ import annotations

from dataclasses import dataclass

ALWAYS, SET, CHANGED = "always", "set", "changed"  # when the kit gives the flag: always; when the case has a value;
# when the value differs from the harness's default
ALL, IMAGE, NLP, SEED003 = "all", "image", "nlp", "seed003"  # the models a key applies to: all; those timed per
# step; those per epoch; seed 003's (catalogue.Model.family)


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
    Setting("framework", "--framework", "framework", str, checked=1),
    Setting("model", "--model", "model", str, checked=1),
    Setting("batch_size", "--batch-size", "local_batch", checked=1),
    Setting("precision", "--precision", "precision", str, "fp32", ("fp32", "tf32", "amp", "bf16"), checked=1,
            recorded=True),
    Setting("seq_len", "--seq-len", "seq_len", scope=NLP, given=SET, checked=3),
    Setting("corpus_size", "--corpus-size", "corpus_size", scope=NLP, given=SET, checked=3),
    Setting("measure_epochs", "--measure-epochs", "measure_epochs", default=1, scope=NLP, checked=3),
    Setting("image_size", "--image-size", "image_size", scope=IMAGE, checked=1),
    Setting("num_classes", "--num-classes", "num_classes", scope=IMAGE, given=SET, checked=3),
    Setting("size", "--size", "size", str, "full", ("full", "tiny"), scope=SEED003, given=CHANGED, checked=3),
    Setting("warmup_steps", "--warmup-steps", "warmup_steps", default=20, checked=3),
    Setting("measure_steps", "--measure-steps", "measure_steps", default=100, scope=IMAGE, checked=3),
    Setting("data", "--data", "data", str, "synthetic"),
    Setting("loader", "--loader", "loader", str, None, ("cpu", "gpu", "dali"), given=SET, checked=2,
            recorded=True),
    Setting("layout", "--layout", "layout", str, "nchw", ("nchw", "nhwc"), scope=IMAGE, given=CHANGED, checked=1,
            recorded=True),
    Setting("mode", "--mode", "mode", str, "eager", ("eager", "compiled"), given=CHANGED, checked=1,
            recorded=True),
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
