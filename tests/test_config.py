"""hosts.yaml -> Inventory: the example loads, the merge order holds, every error names file:line:key."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kit.config.hosts import ENV_VARS, load_hosts
from kit.config.inventory import HOST_DEFAULTS, HostConfig, Inventory
from kit.core.yamlio import ConfigError

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "hosts.example.yaml"


def write(tmp_path: Path, text: str, name: str = "hosts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


MINIMAL = """\
schema_version: 1
hosts:
  - {name: a, address: 192.0.2.1}
"""


def test_example_loads_as_documented():
    inv = load_hosts(EXAMPLE, env={})
    assert inv.names == ["node1", "node2", "node3", "cpu1"]
    assert inv.known_hosts == str(Path("~/.ssh/known_hosts").expanduser())
    assert inv.accept_new_host_keys is False and inv.connect_timeout == 10.0
    node1, node3, cpu1 = inv.get("node1"), inv.get("node3"), inv.get("cpu1")
    assert (node1.user, node1.port, node1.gpus, node1.runtime) == ("bench", 22, 8, "docker")
    assert node1.key_file == str(Path("~/.ssh/id_ed25519").expanduser())
    assert (node3.port, node3.user, node3.gpus, node3.ib_hca, node3.work_dir) == (
        2222, "perf", 4, "mlx5_0,mlx5_1", "/mnt/nvme/kit runs")
    assert (cpu1.gpus, cpu1.ib_hca, cpu1.nic, cpu1.runtime) == (0, None, "eth0", "native")
    assert node3.label == "node3 (198.51.100.21:2222)" and node1.label == "node1 (192.0.2.11)"
    assert node1.line == 64 and EXAMPLE.read_text().splitlines()[63].strip().startswith("- name: node1")


def test_built_in_defaults_fill_what_the_file_leaves_out(tmp_path):
    inv = load_hosts(write(tmp_path, MINIMAL), env={"USER": "alice"})
    (host,) = inv.hosts
    assert host == HostConfig(name="a", address="192.0.2.1", user="alice", line=3, **{
        k: v for k, v in HOST_DEFAULTS.items() if k != "user"})
    assert (inv.known_hosts, inv.accept_new_host_keys, inv.connect_timeout) == (None, False, 10.0)
    assert inv.known_hosts_file() == Path("~/.ssh/known_hosts").expanduser()
    assert load_hosts(write(tmp_path, MINIMAL), env={}).hosts[0].user  # the login name from the password db


LAYERED = """\
schema_version: 1
ssh: {known_hosts: /file/known_hosts, connect_timeout: 5}
defaults: {user: from-defaults, port: 2201, gpus: 1, runtime: native, nic: eth1, work_dir: /defaults}
hosts:
  - {name: plain, address: 192.0.2.1}
  - {name: own, address: 192.0.2.2, user: from-host, port: 2202, gpus: 2, runtime: docker, nic: eth2,
     work_dir: /host}
"""

# key, environment variable, its text, the value it gives, the flag's value
LAYERS = [
    ("user", "KIT_SSH_USER", "from-env", "from-env", "from-flag"),
    ("port", "KIT_SSH_PORT", "2203", 2203, 2204),
    ("gpus", "KIT_GPUS", "3", 3, 4),
    ("runtime", "KIT_RUNTIME", "docker", "docker", "native"),
    ("nic", "KIT_NIC", "eth3", "eth3", "eth4"),
    ("work_dir", "KIT_WORK_DIR", "/env dir", "/env dir", "/flag;dir"),
]


@pytest.mark.parametrize("key,var,text,from_env,from_flag", LAYERS, ids=[row[0] for row in LAYERS])
def test_merge_order_defaults_then_host_then_env_then_flags(tmp_path, key, var, text, from_env, from_flag):
    path = write(tmp_path, LAYERED)
    inv = load_hosts(path, env={})
    plain, own = inv.get("plain"), inv.get("own")
    assert getattr(plain, key) != getattr(own, key)  # defaults < host entry
    assert getattr(plain, key) == {"user": "from-defaults", "port": 2201, "gpus": 1, "runtime": "native",
                                   "nic": "eth1", "work_dir": "/defaults"}[key]
    inv = load_hosts(path, env={var: text})  # host entry < environment, for every host
    assert getattr(inv.get("plain"), key) == getattr(inv.get("own"), key) == from_env
    inv = load_hosts(path, env={var: text}, overrides={key: from_flag})  # environment < flags
    assert getattr(inv.get("plain"), key) == getattr(inv.get("own"), key) == from_flag
    inv = load_hosts(path, env={var: ""}, overrides={key: None})  # empty variable, flag not given: no change
    assert getattr(inv.get("own"), key) == getattr(load_hosts(path, env={}).get("own"), key)


def test_ssh_settings_merge_in_the_same_order(tmp_path):
    path = write(tmp_path, LAYERED)
    assert load_hosts(path, env={}).known_hosts == "/file/known_hosts"
    env = {"KIT_KNOWN_HOSTS": "/env/kh", "KIT_ACCEPT_NEW_HOST_KEYS": "1", "KIT_CONNECT_TIMEOUT": "2.5"}
    inv = load_hosts(path, env=env)
    assert (inv.known_hosts, inv.accept_new_host_keys, inv.connect_timeout) == ("/env/kh", True, 2.5)
    inv = load_hosts(path, env=env, overrides={"known_hosts": "/flag/kh", "accept_new_host_keys": False,
                                               "connect_timeout": 7})
    assert (inv.known_hosts, inv.accept_new_host_keys, inv.connect_timeout) == ("/flag/kh", False, 7.0)
    assert load_hosts(path, env={"KIT_ACCEPT_NEW_HOST_KEYS": "no"}).accept_new_host_keys is False


def test_local_paths_resolve_against_the_file_or_the_current_directory(tmp_path, monkeypatch):
    sub = tmp_path / "conf"
    sub.mkdir()
    path = write(sub, """\
        schema_version: 1
        ssh: {known_hosts: keys/known_hosts}
        defaults: {key_file: ids/id_bench}
        hosts:
          - {name: a, address: 192.0.2.1}
          - {name: b, address: 192.0.2.2, key_file: ~/.ssh/id_b}
          - {name: c, address: 192.0.2.3, key_file: null}
        """)
    inv = load_hosts(path, env={})
    assert inv.known_hosts == str(sub / "keys" / "known_hosts")
    assert inv.get("a").key_file == str(sub / "ids" / "id_bench")
    assert inv.get("b").key_file == str(Path("~/.ssh/id_b").expanduser())
    assert inv.get("c").key_file is None  # ssh-agent / default keys
    monkeypatch.chdir(tmp_path)
    assert load_hosts(path, env={"KIT_SSH_KEY": "k"}).get("c").key_file == str(tmp_path / "k")


def test_remote_paths_and_users_keep_metacharacters(tmp_path):
    path = write(tmp_path, """\
        schema_version: 1
        hosts:
          - {name: a, address: 192.0.2.1, user: "o'brien", data_dir: "/data/$(touch x); `id` & *",
             work_dir: "/w d/\\"q\\"|>", python: "/opt/my env/bin/python"}
        """)
    host = load_hosts(path, env={}).hosts[0]
    assert host.user == "o'brien"
    assert host.data_dir == "/data/$(touch x); `id` & *"
    assert host.work_dir == '/w d/"q"|>'
    assert host.python == "/opt/my env/bin/python"


def test_select_and_get(tmp_path):
    inv = load_hosts(write(tmp_path, LAYERED), env={})
    assert [h.name for h in inv.select("own,plain")] == ["own", "plain"]
    assert [h.name for h in inv.select(["plain"])] == ["plain"]
    assert inv.select(None) == inv.hosts
    with pytest.raises(ConfigError, match=r"no host named 'nope'; known: plain, own"):
        inv.get("nope")
    with pytest.raises(ConfigError, match="named twice"):
        inv.select("own,own")


# (file text, line, key, words in the reason)
ERRORS = [
    ("hosts: []\n", 1, "schema_version", "missing required key"),
    ("schema_version: 2\nhosts: []\n", 1, "schema_version", "unsupported schema_version 2"),
    ("schema_version: 1\n", 1, "hosts", "non-empty list"),
    ("schema_version: 1\nhosts: []\n", 2, "hosts", "non-empty list"),
    ("schema_version: 1\nhost:\n  - {name: a, address: b}\n", 2, "host", "unknown key"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, gpu: 1}\n", 3, "gpu", "unknown key; known: address"),
    ("schema_version: 1\nhosts:\n  - name: a\n    address: b\n    known_hosts: /k\n", 5, "known_hosts",
     "belongs under ssh:"),
    ("schema_version: 1\nssh: {user: x}\nhosts:\n  - {name: a, address: b}\n", 2, "user", "is a host key"),
    ("schema_version: 1\ndefaults:\n  name: x\nhosts:\n  - {name: a, address: b}\n", 3, "name", "is per host"),
    ("schema_version: 1\nssh: [1]\nhosts:\n  - {name: a, address: b}\n", 2, "ssh", "expected a mapping"),
    ("schema_version: 1\nhosts:\n  - {name: a}\n", 3, "address", "missing required key"),
    ("schema_version: 1\nhosts:\n  - address: b\n", 3, "name", "missing required key"),
    ("schema_version: 1\nhosts:\n  - a\n", 2, "hosts", "host 1 must be a mapping"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, port: '22'}\n", 3, "port", "expected an integer, got a str"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, port: 0}\n", 3, "port", "not a TCP port"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, port: 65536}\n", 3, "port", "not a TCP port"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, port: true}\n", 3, "port", "expected an integer"),
    ("schema_version: 1\ndefaults:\n  gpus: -1\nhosts:\n  - {name: a, address: b, gpus: 8}\n", 3, "gpus",
     "0 (CPU only) or more"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, gpus: 1.5}\n", 3, "gpus", "expected an integer"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, runtime: rkt}\n", 3, "runtime", "docker, native, podman"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, data_dir: data}\n", 3, "data_dir", "absolute path"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, work_dir: ~/kit}\n", 3, "work_dir", "~ does not expand"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, work_dir: /}\n", 3, "work_dir", "refusing '/'"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, data_dir: \"/d\\nx\"}\n", 3, "data_dir",
     "control character"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, user: ''}\n", 3, "user", "must not be empty"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, user: -oProxyCommand=x}\n", 3, "user", "start with '-'"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, nic: eth0 eth1}\n", 3, "nic", "no spaces"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, python: null}\n", 3, "python", "expected a string, got null"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: '-oProxyCommand=x'}\n", 3, "address", "not a host name"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: 'b c'}\n", 3, "address", "not a host name"),
    ("schema_version: 1\nhosts:\n  - {name: a/b, address: b}\n", 3, "name", "a host name is letters"),
    ("schema_version: 1\nhosts:\n  - {name: 'a;touch x', address: b}\n", 3, "name", "a host name is letters"),
    ("schema_version: 1\nhosts:\n  - {name: .hidden, address: b}\n", 3, "name", "a host name is letters"),
    ("schema_version: 1\nhosts:\n  - {name: 7, address: b}\n", 3, "name", "expected a string, got int"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b}\n  - {name: a, address: c}\n", 4, "name",
     "already used by the host at line 3"),
    ("schema_version: 1\nhosts:\n  - {name: Node, address: b}\n  - {name: node, address: c}\n", 4, "name",
     "already used"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b}\n  - {name: c,\n     address: B}\n", 5, "address",
     "already used by the host at line 3"),
    ("schema_version: 1\nssh: {connect_timeout: 0}\nhosts:\n  - {name: a, address: b}\n", 2, "connect_timeout",
     "more than 0"),
    ("schema_version: 1\nssh:\n  accept_new_host_keys: 'yes'\nhosts:\n  - {name: a, address: b}\n", 3,
     "accept_new_host_keys", "expected true/false"),
]


@pytest.mark.parametrize("text,line,key,reason", ERRORS, ids=[f"{e[2]}-{i}" for i, e in enumerate(ERRORS)])
def test_every_error_names_file_line_and_key(tmp_path, text, line, key, reason):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_hosts(path, env={})
    assert (err.value.path, err.value.line, err.value.key) == (str(path), line, key)
    assert str(err.value).startswith(f"{path}:{line}: {key}: ")
    assert reason in err.value.reason


def test_same_address_on_another_port_is_another_host(tmp_path):
    inv = load_hosts(write(tmp_path, "schema_version: 1\nhosts:\n  - {name: a, address: 127.0.0.1, port: 2201}\n"
                                     "  - {name: b, address: 127.0.0.1, port: 2202}\n"), env={})
    assert [h.port for h in inv.hosts] == [2201, 2202]


@pytest.mark.parametrize("var,text,reason", [
    ("KIT_SSH_PORT", "ssh", "expected an integer, got 'ssh'"),
    ("KIT_SSH_PORT", "70000", "not a TCP port"),
    ("KIT_GPUS", "-2", "0 (CPU only) or more"),
    ("KIT_RUNTIME", "lxc", "must be one of docker, native, podman"),
    ("KIT_DATA_DIR", "relative", "absolute path"),
    ("KIT_ACCEPT_NEW_HOST_KEYS", "maybe", "expected one of 1, true"),
    ("KIT_CONNECT_TIMEOUT", "soon", "expected an integer or a number"),
])
def test_environment_errors_name_the_variable(tmp_path, var, text, reason):
    with pytest.raises(ConfigError) as err:
        load_hosts(write(tmp_path, MINIMAL), env={var: text})
    assert str(err.value).startswith(f"environment: {var}: ") and reason in err.value.reason


def test_flag_errors_name_the_flag(tmp_path):
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError, match=r"^command line: port: .*not a TCP port"):
        load_hosts(path, env={}, overrides={"port": 0})
    with pytest.raises(ConfigError, match=r"^command line: colour: unknown setting; known: .*work_dir"):
        load_hosts(path, env={}, overrides={"colour": "red"})
    with pytest.raises(ConfigError, match=r"^command line: name: unknown setting"):
        load_hosts(path, env={}, overrides={"name": "x"})
    assert load_hosts(path, env={}, overrides={"port": "2200"}).hosts[0].port == 2200  # flags may be text


def test_a_bad_value_is_an_error_even_when_a_later_layer_replaces_it(tmp_path):
    path = write(tmp_path, "schema_version: 1\ndefaults: {port: 99999}\nhosts:\n  - {name: a, address: b, port: 22}\n")
    with pytest.raises(ConfigError, match=r":2: port: "):
        load_hosts(path, env={}, overrides={"port": 22})


PASSWORDS = [
    ("schema_version: 1\npassword: hunter2\nhosts:\n  - {name: a, address: b}\n", 2, "password"),
    ("schema_version: 1\ndefaults:\n  user: x\n  passwd: hunter2\nhosts:\n  - {name: a, address: b}\n", 4, "passwd"),
    ("schema_version: 1\nhosts:\n  - name: a\n    address: b\n    password: hunter2\n", 5, "password"),
    ("schema_version: 1\nhosts:\n  - {name: a, address: b, key_passphrase: x}\n", 3, "key_passphrase"),
    ("schema_version: 1\nssh:\n  sudo_Password: x\nhosts:\n  - {name: a, address: b}\n", 3, "sudo_Password"),
    ("schema_version: 2\nextra:\n  deep: [{PASSWORD: x}]\n", 3, "PASSWORD"),  # before any other check
]


@pytest.mark.parametrize("text,line,key", PASSWORDS, ids=[f"{p[2]}-{i}" for i, p in enumerate(PASSWORDS)])
def test_passwords_are_refused_anywhere(tmp_path, text, line, key):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_hosts(path, env={})
    assert str(err.value) == f"{path}:{line}: {key}: plaintext passwords are refused; use a key file or ssh-agent"


def test_passwords_are_refused_from_the_environment_and_flags(tmp_path):
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError, match=r"^environment: KIT_SSH_PASSWORD: plaintext passwords are refused"):
        load_hosts(path, env={"KIT_SSH_PASSWORD": "hunter2"})
    with pytest.raises(ConfigError, match=r"^command line: password: plaintext passwords are refused"):
        load_hosts(path, env={}, overrides={"password": "hunter2"})


def test_every_environment_variable_is_documented_in_the_example():
    text = EXAMPLE.read_text()
    assert [var for var in ENV_VARS if var not in text] == []


def test_inventory_is_a_plain_value(tmp_path):
    inv = load_hosts(write(tmp_path, MINIMAL), env={"USER": "u"})
    assert isinstance(inv, Inventory) and inv.path == tmp_path / "hosts.yaml"
    with pytest.raises(AttributeError):
        inv.hosts[0].port = 1  # frozen


def test_config_imports_no_ssh_library():
    probe = "import json, sys, kit.config; print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert set(json.loads(out)).isdisjoint({"fabric", "paramiko", "invoke"})


def test_system_section_names_submitter_and_system(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text("schema_version: 1\nsystem:\n  submitter: Lab\n  name: box\n"
                    "hosts:\n  - {name: a, address: 192.0.2.1}\n")
    inv = load_hosts(path, env={})
    assert (inv.submitter, inv.system_name) == ("Lab", "box")
    path.write_text("schema_version: 1\nsystem:\n  submitter: Lab\n  owner: me\n"
                    "hosts:\n  - {name: a, address: 192.0.2.1}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:4: owner: unknown key"):
        load_hosts(path, env={})
    path.write_text("schema_version: 1\nsystem:\n  submitter: ''\nhosts:\n  - {name: a, address: 192.0.2.1}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:3: system.submitter: expected a non-empty"):
        load_hosts(path, env={})


def test_a_control_character_is_a_config_error_with_its_line(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text("schema_version: 1\nhosts:\n  - {name: a, add\x11ress: 192.0.2.1}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:3: malformed YAML: control character #x0011"):
        load_hosts(path, env={})


@pytest.mark.parametrize(("value", "env"), [(".inf", "inf"), (".nan", "nan"), ("601", "601"), ("1.0e+309", "1e309")])
def test_a_connect_timeout_must_be_finite_and_bounded(tmp_path, value, env):
    text = f"schema_version: 1\nssh: {{connect_timeout: {value}}}\nhosts:\n  - {{name: a, address: b}}\n"
    with pytest.raises(ConfigError) as err:
        load_hosts(write(tmp_path, text), env={})
    assert (err.value.line, err.value.key) == (2, "connect_timeout") and "at most 600 seconds" in err.value.reason
    with pytest.raises(ConfigError, match=r"^environment: KIT_CONNECT_TIMEOUT: .*at most 600 seconds"):
        load_hosts(write(tmp_path, MINIMAL), env={"KIT_CONNECT_TIMEOUT": env})


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    """Ten levels of ten aliases each: 10**10 values once expanded; the secret scan used to walk them all."""
    lines = ["schema_version: 1", 'l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    path = write(tmp_path, "\n".join(lines + ["hosts: [*l9]"]) + "\n")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r":1: more than 200000 values once its aliases \(\*name\) are expanded"):
        load_hosts(path, env={})
    assert time.monotonic() - start < 5
    few = "schema_version: 1\ndefaults: {data_dir: &d /srv/kit}\nhosts:\n  - {name: a, address: b, work_dir: *d}\n"
    assert load_hosts(write(tmp_path, few), env={}).hosts[0].work_dir == "/srv/kit"  # an alias or two is fine


def test_deeply_nested_or_huge_yaml_is_a_config_error(tmp_path):
    path = write(tmp_path, "schema_version: 1\nhosts: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:2: nested deeper than 64 levels"):
        load_hosts(path, env={})
    with open(path, "wb") as f:
        f.truncate(17 * 2**20)
    with pytest.raises(ConfigError, match="larger than 16777216 bytes"):
        load_hosts(path, env={})


@pytest.mark.parametrize("value", ["9" * 5000, "2020-13-45"])
def test_a_value_yaml_cannot_construct_is_a_config_error_with_its_line(tmp_path, value):
    path = write(tmp_path, f"schema_version: 1\nhosts:\n  - {{name: a, address: b, port: {value}}}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:3: unreadable value \((Exceeds the limit|month must be)"):
        load_hosts(path, env={})


def test_a_mistyped_host_in_a_large_fleet_suggests_the_nearest_few(tmp_path):
    hosts = "".join(f"  - {{name: gpu-node-{i:05d}, address: 10.{i // 250}.{i % 250}.1}}\n" for i in range(10_000))
    inv = load_hosts(write(tmp_path, "schema_version: 1\nhosts:\n" + hosts), env={})
    with pytest.raises(ConfigError) as err:
        inv.get("gpu-nod-00123")
    message = str(err.value)
    assert "did you mean: gpu-node-00123" in message and "(10000 hosts in the inventory)" in message
    assert len(message) < 300  # was every name of the fleet on one 69 KB line
