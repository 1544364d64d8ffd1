"""YAML loading that remembers where every key came from, for errors naming file:line:key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kit.core.inputs import InputError, read_input


class ConfigError(InputError):
    """Bad input in a YAML file; str() is one line: 'file:line: key: reason'."""


class LineDict(dict):
    """A mapping that knows its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class _Loader(yaml.SafeLoader):
    pass


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
        text = read_input(p, "YAML file", ConfigError).decode("utf-8")
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
        data = loader.get_single_data()
    except ConfigError:
        raise
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
