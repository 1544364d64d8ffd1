"""kit.config.settings: defaults < KIT_* environment < flags; an empty variable or flag is unset."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.config import hosts, settings

ENV = {"KIT_HOSTS_FILE": "env.yaml", "KIT_MODEL_CODE": "/env/models", "KIT_CACHE_DIR": "/env/cache", "KIT_DEBUG": "1"}


def test_defaults():
    s = settings.resolve(env={})
    assert s == settings.Settings()
    assert (s.hosts_file, s.model_code, s.debug) == (None, None, False)
    assert s.hosts_path == Path("hosts.yaml")
    assert s.cache_dir == Path("~/.cache/kit").expanduser()


def test_environment_overrides_the_defaults():
    s = settings.resolve(env=ENV)
    assert s == settings.Settings(Path("env.yaml"), "/env/models", Path("/env/cache"), True)
    assert s.hosts_path == Path("env.yaml")


def test_flags_override_the_environment():
    s = settings.resolve({"hosts_file": Path("flag.yaml"), "debug": False}, ENV)
    assert (s.hosts_file, s.debug) == (Path("flag.yaml"), False)
    assert s.model_code == "/env/models"  # not given as a flag: the environment's


@pytest.mark.parametrize("empty", ["", None])
def test_an_empty_variable_or_flag_is_unset(empty):
    env = {var: "" for var, _flag, _parse in settings.SOURCES.values()}
    assert settings.resolve({"hosts_file": empty}, env) == settings.Settings()
    assert settings.resolve({"hosts_file": empty}, ENV).hosts_file == Path("env.yaml")


def test_any_non_empty_kit_debug_turns_debugging_on():
    assert settings.resolve(env={"KIT_DEBUG": "0"}).debug is True  # as `if os.environ.get("KIT_DEBUG")` always did


def test_hosts_file_helpers():
    assert settings.hosts_file(env={}) == Path("hosts.yaml")
    assert settings.configured_hosts_file(env={}) is None
    assert settings.hosts_file(None, ENV) == settings.configured_hosts_file(None, ENV) == Path("env.yaml")
    assert settings.configured_hosts_file("flag.yaml", ENV) == Path("flag.yaml")


def test_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="no such setting: hosts"):
        settings.resolve({"hosts": "x.yaml"}, {})


def test_the_documented_table_is_the_merged_one():
    rows = {line.split()[0]: line.split() for line in settings.__doc__.splitlines() if line[:4] == "    "
            and line.split()[0] in settings.SOURCES}
    assert set(rows) == set(settings.SOURCES) == set(settings.Settings.__dataclass_fields__)
    for name, (var, flag, _parse) in settings.SOURCES.items():
        assert var in rows[name] and (flag or "-") in rows[name]


def test_kit_wide_variables_and_per_host_ones_share_only_kit_model_code():
    """KIT_MODEL_CODE is both this machine's model code root and every host's `model_code` (documented)."""
    shared = {var for var, _flag, _parse in settings.SOURCES.values()} & set(hosts.ENV_VARS)
    assert shared == {"KIT_MODEL_CODE"}
    assert "kit.config.hosts.ENV_VARS" in settings.__doc__


def test_a_missing_hosts_file_is_an_error_whether_named_by_flag_or_environment(tmp_path, monkeypatch):
    """KIT_HOSTS_FILE follows --hosts-file's rule: named and missing is an error, never placeholder hosts."""
    monkeypatch.chdir(tmp_path)
    assert settings.optional_hosts_file(None, {}) is None  # nothing configured, no hosts.yaml: placeholders
    missing = tmp_path / "missing.yaml"
    assert settings.optional_hosts_file(None, {"KIT_HOSTS_FILE": str(missing)}) == missing
    assert settings.optional_hosts_file(missing, {}) == missing
    (tmp_path / "hosts.yaml").write_text("schema_version: 1\n")
    assert settings.optional_hosts_file(None, {}) == Path("hosts.yaml")
    (tmp_path / "hosts.yaml").unlink()
    kit = [sys.executable, "-m", "kit", "bench", "--suite", "local", "--dry-run"]
    by_env = subprocess.run(kit, capture_output=True, text=True, env={**os.environ, "KIT_HOSTS_FILE": str(missing)})
    by_flag = subprocess.run([*kit, "--hosts-file", str(missing)], capture_output=True, text=True)
    for done in (by_env, by_flag):
        assert done.returncode == 2 and done.stderr == f"kit: {missing}: no such file\n", done.stderr
