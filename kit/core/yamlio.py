"""YAML loading that remembers where every key came from, for errors naming file:line:key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kit.core.inputs import InputError, read_input

MAX_YAML_BYTES = 16 * 2**20  # a hosts, suite, pins or claims file
MAX_YAML_NODES = 200_000  # values once every alias is expanded (a "billion laughs" alias bomb stops here)
MAX_YAML_DEPTH = 64  # nesting: PyYAML's scanner slows down quadratically with it


class ConfigError(InputError):
    """Bad input in a YAML file; str() is one line: 'file:line: key: reason'."""


class LineDict(dict):
    """A mapping that knows its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class _Loader(yaml.SafeLoader):
    depth = 0

    def _deeper(self) -> None:
        if self.depth >= MAX_YAML_DEPTH or self.flow_level >= MAX_YAML_DEPTH:
            raise ConfigError(self.name, f"nested deeper than {MAX_YAML_DEPTH} levels", self.get_mark().line + 1)

    def fetch_flow_collection_start(self, token_class) -> None:
        self._deeper()
        super().fetch_flow_collection_start(token_class)

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # an integer of thousands of digits, a 13th month
            raise ConfigError(self.name, f"unreadable value ({str(exc).split(';')[0]})", node.start_mark.line + 1
                              ) from None

    def compose_node(self, parent, index):
        self._deeper()
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise ConfigError(loader.name, "mapping keys must be scalars", key_node.start_mark.line + 1)
        if key in result:
            raise ConfigError(loader.name, "duplicate key", key_node.start_mark.line + 1, str(key))
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = read_input(p, "YAML file", ConfigError, MAX_YAML_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(p, "not UTF-8 text (binary file?)") from None
    if "\x00" in text:
        raise ConfigError(p, "binary file (NUL bytes), not YAML")
    try:
        loader = _Loader(text)  # the reader refuses control characters at once
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(p, f"malformed YAML: control character #x{exc.character:04x} is not allowed", line) from None
    loader.name = str(p)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_YAML_NODES:
            raise ConfigError(p, f"more than {MAX_YAML_NODES} values once its aliases (*name) are expanded "
                              "(an alias bomb?)", node.start_mark.line + 1)
        data = loader.construct_document(node) if node is not None else None
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(p, "malformed YAML: nested too deeply") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(p, f"malformed YAML: {exc.problem or exc.context}", line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(p, f"malformed YAML: {exc}") from None
    finally:
        loader.dispose()
    if data is None:
        raise ConfigError(p, "empty YAML file")
    return data


def _expanded_size(node: yaml.Node, seen: dict) -> int:
    """How many values the document holds with every alias expanded (an alias is the same node object again)."""
    if id(node) not in seen:
        seen[id(node)] = 0  # a recursive alias counts once
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else \
            node.value if isinstance(node, yaml.SequenceNode) else []
        total = 1
        for child in children:
            total += _expanded_size(child, seen)
            if total > MAX_YAML_NODES:
                break
        seen[id(node)] = total
    return seen[id(node)]


def require(entry: LineDict, key: str, kind: type | tuple, path: Path) -> Any:
    if key not in entry:
        raise ConfigError(path, "missing required key", entry.line, key)
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ConfigError(path, f"expected {kind_name(kind)}, got {type(value).__name__}", entry.line_of(key), key)
    return value


def optional(entry: LineDict, key: str, kind: type | tuple, path: Path, default: Any) -> Any:
    return require(entry, key, kind, path) if key in entry else default


def kind_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        list: "a list",
        bool: "true/false",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)
