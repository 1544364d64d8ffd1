"""A suite's expanded cases and the published figures they are checked against (Case, Reference, Suite)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kit.config import programs
from kit.config.case_keys import CASE_KEYS, SEED003_ONLY
from kit.core.catalogue import contract
from kit.core.layout import TAGGED, case_key, case_name, run_log_path, variant_tag


def same_unit(unit: str) -> str:
    """A throughput unit by what it counts: images/s is samples/s (an image is the sample of an image model)."""
    return {"images/s": "samples/s", "img/s": "samples/s"}.get(unit, unit)


@dataclass(frozen=True)
class Reference:
    value: float
    lower: float | None
    upper: float | None
    unit: str
    source: str = ""
    math: str | None = None  # what the publisher's framework ran when it differs from the published precision
    batch: int | None = None  # the publisher's per-GPU batch, where it differs from the case's
    container: str = ""  # the publisher's software: container image or framework release
    date: str = ""  # of the publisher's log or table (YYYY-MM-DD)

    def bounds(self) -> tuple[float | None, float | None]:
        low = None if self.lower is None else self.value * (1 + self.lower)
        high = None if self.upper is None else self.value * (1 + self.upper)
        return low, high

    @property
    def bounded(self) -> bool:
        """False for a figure shown beside the median only (both bounds null: nothing to check, as in ReFrame)."""
        return self.lower is not None or self.upper is not None

    def measures(self, unit: str) -> bool:
        """Whether a median in `unit` compares with this figure."""
        return same_unit(self.unit) == same_unit(unit)

    def holds(self, measured: float) -> bool:
        low, high = self.bounds()
        return (low is None or measured >= low) and (high is None or measured <= high)

    def to_dict(self) -> dict:
        data = {"value": self.value, "lower": self.lower, "upper": self.upper, "unit": self.unit, "source": self.source}
        extra = {"math": self.math, "batch": self.batch, "container": self.container, "date": self.date}
        return data | {k: v for k, v in extra.items() if v}

    def described(self) -> str:
        """The source with what differs from the case: 'Lambda ... (batch 1280, NGC 23.10, 2024-02-05)'."""
        said = [f"batch {self.batch}" if self.batch else "", self.container, self.date]
        said = [s for s in said if s]
        return self.source + (f" ({', '.join(said)})" if said else "")


@dataclass(frozen=True)
class Case:
    framework: str
    model: str
    batch_size: int
    precision: str
    nodes: int
    gpus_per_node: int
    warmup_steps: int
    measure_steps: int
    repeats: int
    data: str
    image_size: int
    num_classes: int
    layout: str | None  # nchw | nhwc; None: a published program's own
    mode: str | None  # eager | compiled; None: a published program's own
    impl: str  # harness | reference
    timeout_s: float
    line: int = 0
    references: tuple[Reference, ...] = ()  # at most one bounded (checked); the others shown beside the median
    loader: str | None = None  # cpu | gpu | dali: the harness's JPEG pipeline (data: imagenet); None: none or its own
    loader_named: bool = False  # a loader other than the suite's default: the case's names carry it
    image: str | None = None  # the pins image it names (`image:`); None: the default (Pins.for_case)
    size: str = "full"  # seed 003's models: full (published) or tiny
    seq_len: int | None = None  # bert / transformer
    corpus_size: int | None = None  # bert / transformer
    measure_epochs: int = 1  # bert / transformer
    extra: tuple[tuple[str, Any], ...] = ()  # the EXTRA_KEYS' values (checked and bounded as the fields are)

    def __getattr__(self, name: str) -> Any:  # an EXTRA_KEYS key, as an attribute like the others
        for key, value in object.__getattribute__(self, "extra"):
            if key == name:
                return value
        raise AttributeError(name)

    @property
    def case_dir(self) -> str:
        return case_name(self.nodes, self.gpus_per_node)

    @property
    def channels_last(self) -> bool:
        return self.layout == "nhwc"

    @property
    def tag(self) -> str:
        """The precision segment of the case's key and log names: precision[-nhwc][-compiled][-<loader>load], each
        tagged contract key's word (kit.core.layout.variant_tag); the loader only where not the suite's default."""
        named = {st.key: getattr(self, st.key) for st in TAGGED}
        return variant_tag(self.precision, **(named | {"loader": self.loader if self.loader_named else None}))

    @property
    def reference(self) -> Reference | None:
        """The bounded reference the median is checked against, else the first shown one."""
        bounded = [r for r in self.references if r.bounded]
        return (bounded or list(self.references) or [None])[0]

    @property
    def runner(self) -> str:
        """Old name of impl (harness | reference), kept for callers not yet migrated."""
        return self.impl

    @property
    def log_framework(self) -> str:
        """The framework folder of the logs: the framework, or the reference implementation's name."""
        if self.impl == "harness":
            return self.framework
        return programs.implementation(self.framework, self.model).name

    def ref_job(self, device: str = "gpu") -> programs.RefJob:
        """The program's job; `device` the suite's hardware (on a CPU the case's image side goes with it)."""
        return programs.RefJob(self.framework, self.model, self.precision, self.batch_size, self.gpus_per_node,
                                self.nodes, self.data, device, self.image_size if device == "cpu" else None)

    @property
    def processes(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.processes

    @property
    def key(self) -> str:
        return case_key(self.log_framework, self.model, self.batch_size, self.case_dir, self.tag)

    def log_path(self, repeat: int) -> Path:
        """Relative to runs/<id>/logs/; repeats count from 1."""
        return run_log_path(self.log_framework, self.model, self.batch_size, self.nodes, self.gpus_per_node,
                            self.tag, repeat)

    def to_dict(self) -> dict:
        data = {k: getattr(self, k) for k in CASE_KEYS
                if (k != "image" or self.image) and (k not in SEED003_ONLY or getattr(self, k) != CASE_KEYS[k][1])}
        data["reference"] = self.reference.to_dict() if self.reference else None
        if len(self.references) > 1:
            data["references"] = [r.to_dict() for r in self.references]
        data["implementation"] = self.log_framework if self.impl == "reference" else None
        return data


# the contract's keys with no field of Case's own: kept in Case.extra (kit.config.case_entries)
EXTRA_KEYS = tuple(st.key for st in contract.SETTINGS if st.key not in {f.name for f in fields(Case)})


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    description: str
    hardware: str
    cases: list[Case] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "description": self.description,
                "hardware": self.hardware, "cases": [c.to_dict() for c in self.cases]}
