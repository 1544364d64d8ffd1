"""Declared shapes of the JSON records the kit writes: checked when read (one InputError naming the file and the
key), migrated from the schema versions earlier kits wrote, checked again before they are written.

    SHAPE = Obj({"runs": Map(Obj({"repeat": INT, "figure": Opt(NUMBER)})), "warnings": Seq(STR)})
    check(data, SHAPE, path)            # InputError(path, "expected an integer, found str", key="runs.<log>.repeat")
    data = migrated(data, MIGRATIONS, current, path)   # schema_version 1 -> ... -> current, one step per version

A declared object keeps keys it does not declare (a later kit's, a runner's own), unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.core.inputs import InputError


@dataclass(frozen=True)
class Kind:
    types: tuple[type, ...]
    said: str

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.types) and not (isinstance(value, bool) and bool not in self.types)


STR, INT, NUMBER, BOOL = Kind((str,), "a string"), Kind((int,), "an integer"), Kind((int, float), "a number"), \
    Kind((bool,), "true or false")
OBJECT, LIST = Kind((dict,), "an object"), Kind((list,), "a list")


@dataclass(frozen=True)
class Opt:
    """SHAPE, or null."""
    shape: Any


@dataclass(frozen=True)
class Obj:
    """An object whose declared keys (those present) have their shapes; others are kept unchecked."""
    keys: Mapping[str, Any]


@dataclass(frozen=True)
class Map:
    """An object whose every value has SHAPE (its keys are names: logs, hosts)."""
    values: Any


@dataclass(frozen=True)
class Seq:
    """A list whose every item has SHAPE."""
    items: Any


def _found(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def check(value: Any, shape: Any, path: str | Path, key: str = "") -> None:
    """InputError(path, ..., key) at the first value (depth first, in file order) that does not have its shape."""
    def wrong(said: str) -> InputError:
        return InputError(path, f"expected {said}, found {_found(value)}", key=key or None)

    if isinstance(shape, Opt):
        if value is not None:
            check(value, shape.shape, path, key)
        return
    if isinstance(shape, Kind):
        if not shape.accepts(value):
            raise wrong(shape.said)
        return
    if isinstance(shape, (Obj, Map)):
        if not isinstance(value, dict):
            raise wrong("an object")
        for name, item in value.items():
            inner = shape.values if isinstance(shape, Map) else shape.keys.get(name)
            if inner is not None:
                check(item, inner, path, f"{key}.{name}" if key else str(name))
        return
    if isinstance(shape, Seq):
        if not isinstance(value, list):
            raise wrong("a list")
        for n, item in enumerate(value):
            check(item, shape.items, path, f"{key}.{n}" if key else str(n))
        return
    raise TypeError(f"not a shape: {shape!r}")


Migration = Callable[[dict], dict]


def version_of(data: dict, path: str | Path) -> int:
    """A record's schema_version; 1 where it has none (the first kits wrote none)."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(path, f"expected a positive integer, found {version!r}", key="schema_version")
    return version


def migrated(data: dict, migrations: Mapping[int, Migration], current: int, path: str | Path) -> dict:
    """DATA brought to schema version CURRENT: migrations[v] takes a version-v record to v+1 (a new dict; DATA is
    not changed). A version newer than CURRENT is an InputError: a later kit wrote it."""
    version = version_of(data, path)
    if version > current:
        raise InputError(path, f"schema_version {version} was written by a later kit; this kit reads up to {current}",
                         key="schema_version")
    while version < current:
        data = {**migrations[version](data), "schema_version": version + 1}
        version += 1
    return data
