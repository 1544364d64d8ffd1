"""The DLPerf run-directory layout (pure path logic, no file contents).

    <framework>/<model>/bz<B>/<N>n<G>g/<model>_b<B>_<precision>_<run>.log

<precision> is the case's tag: the precision, then a word for each contract key with a tag (its row in
scripts/harness/contract.py) whose value is not train.py's default: -nhwc and -compiled where the harness ran
channels-last or compiled (resnet50_b256_amp-nhwc-compiled_1.log); nchw and eager add nothing.

Any subtree works down to a folder of <N>n<G>g/ case folders; node and GPU counts have
any number of digits (16n8g, 128n8g).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath

from kit.core.catalogue import contract

# ASCII digits only: \d and int() also take other scripts' digits, so '_٤' would be a fourth repeat
CASE_DIR = re.compile(r"^(?P<nodes>\d+)n(?P<gpus>\d+)g$", re.ASCII)
BATCH_DIR = re.compile(r"^bz(?P<batch>\d+)$", re.ASCII)
LOG_NAME = re.compile(r"^(?P<model>.+?)_b(?P<batch>\d+)_(?P<precision>\w+?(?:-[a-z0-9]+)*)_(?P<run>\d+)\.log$",
                      re.ASCII)
TAGGED = tuple(sorted((st for st in contract.SETTINGS if st.tag), key=lambda st: st.tag_rank))  # in name order
# a tag's word -> (key, value), for the keys with choices: {'nhwc': ('layout', 'nhwc'), 'cpuload': ('loader', 'cpu')}
TAG_SUFFIXES = {st.tag.format(v): (st.key, v) for st in TAGGED for v in st.choices if v != st.default}


def variant_tag(precision: str, **named) -> str:
    """'amp', 'amp-nhwc', 'fp32-compiled', 'bf16-nhwc-compiled', 'amp-nhwc-cpuload': what a case's names say it ran,
    from NAMED (key -> value) of the tagged contract keys; None or train.py's default adds nothing."""
    words = [st.tag.format(named[st.key]) for st in TAGGED if named.get(st.key) not in (None, st.default)]
    return "-".join([precision, *words])


def _tagged_value(word: str) -> tuple[str, object] | None:
    """(key, value) a word names: a tag of TAG_SUFFIXES, or a tagged key without choices ('w7' of 'w{}')."""
    if word in TAG_SUFFIXES:
        return TAG_SUFFIXES[word]
    for st in TAGGED:
        head, _, tail = st.tag.partition("{}")
        if st.choices or not (word.startswith(head) and word.endswith(tail) and len(word) > len(head) + len(tail)):
            continue
        try:
            return st.key, st.kind(word[len(head):len(word) - len(tail)])
        except ValueError:
            continue
    return None


def split_tag(tag: str) -> dict[str, object]:
    """variant_tag's inverse: {'precision': 'amp', 'layout': 'nhwc', 'mode': 'compiled'}; a part the tag does not
    state is absent (nchw / eager for the harness, the program's own for a published program)."""
    precision, *rest = tag.split("-")
    parts: dict[str, object] = {"precision": precision}
    for word in rest:
        found = _tagged_value(word)
        if found is None:
            known = [*TAG_SUFFIXES, *(st.tag for st in TAGGED if not st.choices)]
            raise ValueError(f"{tag!r}: unknown variant {word!r} (known: {', '.join(known)})")
        parts[found[0]] = found[1]
    return parts


def run_folder(log_rel: PurePath) -> PurePosixPath:
    """A run's own folder for what it leaves beside its log (launcher/, hosts/<host>/, each host's work dir):
    <fw>/<model>/bz<B>/<N>n<G>g/<precision>/<repeat>, from the log's path relative to logs/."""
    m = LOG_NAME.match(log_rel.name)
    if m is None:
        raise ValueError(f"{log_rel}: not a run log name (<model>_b<B>_<precision>_<repeat>.log)")
    return PurePosixPath(*PurePath(log_rel).parent.parts, m["precision"], m["run"])


def log_of_run_folder(folder: PurePath) -> Path:
    """The inverse of run_folder: <fw>/<model>/bz<B>/<case>/<precision>/<repeat> -> its log path under logs/."""
    *case, precision, repeat = PurePath(folder).parts
    if len(case) != 4 or not case[2].startswith("bz"):
        raise ValueError(f"{folder}: not a run folder (<fw>/<model>/bz<B>/<N>n<G>g/<precision>/<repeat>)")
    return Path(*case, f"{case[1]}_b{case[2][2:]}_{precision}_{repeat}.log")


@dataclass(frozen=True, order=True)
class GroupKey:
    framework: str
    model: str
    batch: int
    precision: str

    def case_key(self, case: str) -> str:
        return case_key(self.framework, self.model, self.batch, case, self.precision)

    def label(self) -> str:
        parts = [self.framework, self.model, f"batch {self.batch}", self.precision]
        return " · ".join(p for p in parts if p)


@dataclass(frozen=True)
class RunLog:
    path: Path
    group: GroupKey
    nodes: int
    gpus_per_node: int
    run: int

    @property
    def case(self) -> str:
        return case_name(self.nodes, self.gpus_per_node)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Stray:
    path: Path
    reason: str


def case_name(nodes: int, gpus_per_node: int) -> str:
    return f"{nodes}n{gpus_per_node}g"


def case_key(framework: str, model: str, batch: int, case: str, precision: str) -> str:
    """'paddle/resnet50/bz256/1n8g/fp32': how suites, reports and rules name one case."""
    return f"{framework}/{model}/bz{batch}/{case}/{precision}"


def run_log_path(
    framework: str, model: str, batch: int, nodes: int, gpus_per_node: int, precision: str, run: int
) -> Path:
    """Where a run's log goes, relative to runs/<run_id>/logs/."""
    return Path(
        framework, model, f"bz{batch}", case_name(nodes, gpus_per_node), f"{model}_b{batch}_{precision}_{run}.log"
    )


def classify(path: Path, root: Path) -> RunLog | Stray:
    """Read framework/model/batch/case/run off a log's path below root."""
    case = CASE_DIR.match(path.parent.name)
    if case is None:
        return Stray(path, "not inside an <N>n<G>g case folder")
    name = LOG_NAME.match(path.name)
    if name is None:
        return Stray(path, "name does not follow <model>_b<B>_<precision>_<run>.log")
    nodes, gpus = int(case["nodes"]), int(case["gpus"])
    if nodes < 1 or gpus < 1:
        return Stray(path, f"case folder {path.parent.name} has zero nodes or GPUs")
    batch = int(name["batch"])
    framework = model = ""
    batch_dir = path.parent.parent  # <framework>/<model>/bz<B>/ above the case, where the tree has them
    if _within(batch_dir, root) and (bz := BATCH_DIR.match(batch_dir.name)):
        if int(bz["batch"]) != batch:
            return Stray(path, f"batch {batch} in the file name disagrees with folder {batch_dir.name}")
        if _within(batch_dir.parent, root):
            model = batch_dir.parent.name
            if _within(batch_dir.parent.parent, root):
                framework = batch_dir.parent.parent.name
    return RunLog(
        path, GroupKey(framework, model or name["model"], batch, name["precision"]), nodes, gpus, int(name["run"])
    )


def _within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


SIDECAR_SUFFIX = ".cmd.json"  # a reference run's command record beside its log (scripts/reference/launch.py)
TELEMETRY_SUFFIX = ".gpu-telemetry"  # what the GPUs did during a run (scripts/telemetry/gpu_sampler.py), raw


def sidecar_name(log_name: str) -> str:
    """The name of a log's command record: resnet50_b256_amp_1.log -> resnet50_b256_amp_1.cmd.json."""
    return log_name.removesuffix(".log") + SIDECAR_SUFFIX


def telemetry_name(log_name: str) -> str:
    """The name of a run's GPU samples: resnet50_b256_amp_1.log -> resnet50_b256_amp_1.gpu-telemetry."""
    return log_name.removesuffix(".log") + TELEMETRY_SUFFIX


def find_logs(root: Path) -> tuple[list[RunLog], list[Stray]]:
    """Every run log below root (sorted), plus the files that look like logs but don't fit."""
    root = Path(root)
    logs: list[RunLog] = []
    strays: list[Stray] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        in_case = CASE_DIR.match(here.name) is not None
        for filename in sorted(filenames):
            if (not in_case and not filename.endswith(".log")) or filename.endswith((SIDECAR_SUFFIX, TELEMETRY_SUFFIX)):
                continue
            found = classify(here / filename, root)
            (logs if isinstance(found, RunLog) else strays).append(found)
    logs.sort(key=lambda r: (r.group, r.nodes, r.gpus_per_node, r.run))
    return logs, strays
