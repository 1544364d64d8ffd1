"""YAML loading that remembers where every key came from, for errors naming file:line:key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """Bad input in a YAML file; str() is one line: 'file:line: key: reason'."""

    def __init__(self, path: str | Path, reason: str, line: int | None = None, key: str | None = None):
        self.path, self.reason, self.line, self.key = str(path), reason, line, key
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key + ': ' if key else ''}{reason}")


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
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(p, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(p, "is a directory, not a YAML file") from None
    except UnicodeDecodeError:
        raise ConfigError(p, "not UTF-8 text (binary file?)") from None
    except OSError as exc:
        raise ConfigError(p, f"cannot read: {exc.strerror or exc}") from None
    if "\x00" in text:
        raise ConfigError(p, "binary file (NUL bytes), not YAML")
    loader = _Loader(text)
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
