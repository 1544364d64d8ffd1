"""kit.hosts.connect: quoting that keeps hostile values data, and SSH with strict host keys on real hosts.

Part 1 runs every command line through real shells (dash as sh, bash) locally, no SSH.
Part 2 uses the `ssh_hosts` fixture: sshd in network namespaces (tests/nethosts.py).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import paramiko
import pytest
import yaml

from kit.config.host_values import NAME_RE
from kit.config.hosts import ConfigError, load_hosts
from kit.hosts.connect import (
    AuthFailed,
    HostKeyError,
    UnreachableHost,
    _QuickAckSocket,
    check_reachable,
    connect,
    quote_cmd,
    remote_command,
    remote_env,
)
from kit.hosts.fanout import on_all, values

MARKER = "pwned"
HOSTILE = [
    f"; touch {MARKER}", f"$(touch {MARKER})", f"`touch {MARKER}`", f"&& touch {MARKER}", f"|| touch {MARKER}",
    f"| tee {MARKER}", f"\ntouch {MARKER}", f"x\n touch {MARKER}\n", f"'; touch {MARKER}; '", f'"; touch {MARKER}; "',
    f">{MARKER}", f"2>{MARKER}", f"<{MARKER}", f"({MARKER})", f"a & touch {MARKER} &", f"$'\\x3b' touch {MARKER}",
    "it's", 'say "hi"', "two words", "  lead and trail  ", "tab\there", "*", "?", "[a-z]*", "{a,b}", "~", "~root",
    "-rf", "--help", "-n", "-", "$HOME", "${PATH}", "$((6*7))", "!!", "!$", "#not a comment", "a\\b", "\\", "'", '"',
    "''", '""', "", " ", "%s%n", "a=b", "$(", "`", "\x7f", "ünïcödé ✓", "a;b|c&d", "\r", "\\\n",
]
ALPHABET = list(";&|$`'\"\\\n\t *?[]{}()<>!#~=%-.,:@^") + ["a", "Z", "0", "é", " touch pwned", ">pwned", "$(touch pwned)"]


def random_values(n: int = 300, seed: int = 20240601) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(n)]


VALUES = HOSTILE + random_values()
SHELLS = [s for s in ("sh", "bash", "zsh") if shutil.which(s)]


def dir_component(value: str) -> str:
    """A single path component made of the value (no '/', not empty, '.' or '..')."""
    text = value.replace("/", "_")
    return text if text not in ("", ".", "..") else f"_{text}_"


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_stay_data_in_a_real_shell(shell, tmp_path):
    """printf, env and mkdir -p over each value: it comes back byte for byte and nothing else runs."""
    assert len(VALUES) > 350
    base = tmp_path.resolve()
    for value in VALUES:
        data_dir = f"{base}/data/{dir_component(value)}"
        line = " && ".join([
            quote_cmd(["mkdir", "-p", data_dir]),
            remote_command(["printf", "%s\\0", value], cwd=data_dir),
            remote_command(["printenv", "V"], env={"V": value, "OTHER": value}),
        ])
        out = subprocess.run([shell, "-c", line], cwd=base, capture_output=True, timeout=10)
        assert (out.returncode, out.stderr) == (0, b""), (value, line)
        assert out.stdout == value.encode() + b"\0" + value.encode() + b"\n", (value, line)
        assert os.listdir(base / "data") == [dir_component(value)], (value, line)
        assert [p for p in base.rglob(MARKER) if str(p) != data_dir] == [], (value, line)
        shutil.rmtree(base / "data")
    assert os.listdir(base) == []


def test_quote_cmd_is_shlex_join_and_refuses_what_cannot_be_one_word():
    assert quote_cmd(["mkdir", "-p", "/a b/$(x)"]) == "mkdir -p '/a b/$(x)'"
    assert quote_cmd(["echo", Path("/p q"), 3]) == "echo '/p q' 3"
    for bad in (["echo", "a\x00b"], [], "echo hi", ["-rf"], ["echo", None], ["echo", True], ["echo", b"x"]):
        with pytest.raises(ValueError):
            quote_cmd(bad)


def test_remote_env_quotes_values_and_validates_names():
    assert remote_env({}) == ""
    assert remote_env({"A": "x y", "B_2": 3}) == "env 'A=x y' B_2=3"
    assert remote_command(["true"], env={"K": "$v"}, cwd="/w d") == "cd -- '/w d' && env 'K=$v' true"
    for bad in ({"A B": "x"}, {"1A": "x"}, {"A;touch x": "x"}, {"": "x"}, {"A=B": "x"}, {"A": "x\x00"},
                {"A": None}, {"-u": "x"}):
        with pytest.raises(ValueError):
            remote_env(bad)


def write_hosts(tmp_path: Path, hosts: list[dict], **ssh) -> Path:
    path = tmp_path / f"hosts-{len(list(tmp_path.glob('hosts-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "ssh": ssh, "hosts": hosts}, allow_unicode=True,
                                   sort_keys=False))
    return path


@pytest.mark.parametrize("value", VALUES[:80])
def test_hostile_names_are_refused_and_hostile_paths_kept_exactly(tmp_path, value):
    if not NAME_RE.match(value):
        with pytest.raises(ConfigError, match=r"\.yaml:\d+: name: (.*a host name is letters|contains a control|must not be empty)"):
            load_hosts(write_hosts(tmp_path, [{"name": value, "address": "192.0.2.1"}]), env={})
    path = write_hosts(tmp_path, [{"name": "a", "address": "192.0.2.1", "user": f"u{value}", "data_dir": f"/d/{value}",
                                   "work_dir": f"/w/{value}/x"}])
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        with pytest.raises(ConfigError, match="control character"):
            load_hosts(path, env={})
        return
    host = load_hosts(path, env={}).hosts[0]
    assert (host.user, host.data_dir, host.work_dir) == (f"u{value}", f"/d/{value}", f"/w/{value}/x")


# --- real SSH hosts --------------------------------------------------------------------------

def host_entry(h, **extra) -> dict:
    entry = {"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key_file": str(h.key_file),
             "gpus": 0, "nic": h.nic, "runtime": "native"}
    return {**entry, **extra}


def inventory(ssh_hosts, tmp_path: Path, extra: list[dict] | None = None, *, known_hosts: Path | None = None,
              accept: bool = False, timeout: float = 5, **fields):
    hosts = [host_entry(h, **fields) for h in ssh_hosts.hosts] + (extra or [])
    path = write_hosts(tmp_path, hosts, known_hosts=str(known_hosts or ssh_hosts.known_hosts),
                       accept_new_host_keys=accept, connect_timeout=timeout)
    return load_hosts(path, env={})


def other_key_line(tmp_path: Path, entry: str) -> str:
    key = tmp_path / "other_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kind, b64 = (tmp_path / "other_ed25519.pub").read_text().split()[:2]
    return f"{entry} {kind} {b64}\n"


def test_connect_runs_commands_on_the_named_host(ssh_hosts, tmp_path):
    inv = inventory(ssh_hosts, tmp_path)
    assert len(inv.hosts) >= 2
    for host in inv.hosts:
        with connect(host, inv) as conn:
            assert conn.is_connected
            # no in_stream=False: remote commands never read local stdin (pytest's would raise)
            assert conn.run("hostname", hide=True).stdout.strip() == host.name


@pytest.mark.parametrize("timer_lost_the_race", [False, True])
def test_a_command_past_its_timeout_is_a_timeout_even_when_invokes_timer_is_late(ssh_hosts, tmp_path, monkeypatch,
                                                                                 timer_lost_the_race):
    from invoke.exceptions import CommandTimedOut
    from invoke.runners import Runner

    if timer_lost_the_race:  # the channel closed by the timer, read back before the timer thread ended
        monkeypatch.setattr(Runner, "timed_out", property(lambda self: False))
    inv = inventory(ssh_hosts, tmp_path)
    with connect(inv.hosts[0], inv) as conn:
        t0 = time.monotonic()
        with pytest.raises(CommandTimedOut):
            conn.run("sleep 30", hide=True, warn=True, timeout=1)
        assert time.monotonic() - t0 < 10
        assert conn.run("exit 3", hide=True, warn=True, timeout=5).exited == 3  # an ordinary exit stays one


def test_a_timeouts_kill_finding_the_connection_gone_is_quiet(ssh_hosts, tmp_path):
    """invoke's timer kills a command at its timeout from a thread of its own by closing the channel; when the
    connection went down first (the command ended or was stopped as the timer fired, the host went away), fabric's
    close raised EOFError in the timer's thread (before its transport noticed: about 1 try in 3 here): a traceback on
    the user's terminal, and nothing left to kill."""
    inv = inventory(ssh_hosts, tmp_path)
    for _ in range(10):
        with connect(inv.hosts[0], inv) as conn:
            transport = conn.client.get_transport()
            runner = conn.config.runners.remote(context=conn)
            runner.channel = transport.open_session()
            transport.sock.shutdown(socket.SHUT_RDWR)  # the connection down under the open channel
            runner.kill()


def test_ssh_sockets_send_at_once_and_acknowledge_at_once(ssh_hosts, tmp_path):
    """TCP_NODELAY, and TCP_QUICKACK re-armed after each read: without them Nagle's algorithm against delayed ACKs
    stalled each connection's handshake and its first command ~40 ms (OpenSSH's messages right after login)."""
    inv = inventory(ssh_hosts, tmp_path)
    with connect(inv.hosts[0], inv) as conn:
        sock = conn.client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert isinstance(sock, _QuickAckSocket)
        assert conn.run("echo ok", hide=True).stdout == "ok\n"
        # AEAD first (the MAC in the cipher's C code, not in Python per packet); no CBC or 3DES offered
        transport = conn.client.get_transport()
        assert (transport.local_cipher, transport.remote_cipher) == ("aes128-gcm@openssh.com",) * 2
        assert not [c for c in transport.get_security_options().ciphers if "cbc" in c]
        assert sock.gettimeout() is not None  # paramiko's transport polls it with a timeout, as before


def test_hostile_values_stay_data_over_ssh(ssh_hosts, tmp_path):
    inv = inventory(ssh_hosts, tmp_path)
    host = inv.hosts[0]
    base = f"{tmp_path.resolve()}/remote"
    with connect(host, inv) as conn:
        for value in HOSTILE:
            data_dir = f"{base}/{dir_component(value)}"
            line = " && ".join([quote_cmd(["mkdir", "-p", data_dir]),
                                remote_command(["printf", "%s\\0", value], env={"V": value}, cwd=data_dir),
                                remote_command(["printenv", "V"], env={"V": value})])
            res = conn.run(line, hide=True, warn=True, in_stream=False)
            assert (res.exited, res.stderr) == (0, ""), (value, line)
            assert res.stdout == f"{value}\0{value}\n", (value, line)
        found = conn.run(quote_cmd(["find", base, "-name", MARKER]), hide=True, in_stream=False).stdout
        listing = conn.run(quote_cmd(["ls", "-A", base]), hide=True, in_stream=False).stdout
    assert found == ""
    assert len(listing.splitlines()) >= len({dir_component(v) for v in HOSTILE if "\n" not in v})


def test_unknown_host_key_is_refused_with_advice(ssh_hosts, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inv = inventory(ssh_hosts, tmp_path, known_hosts=empty)
    host = inv.hosts[0]
    with pytest.raises(HostKeyError) as err:
        connect(host, inv)
    message = str(err.value)
    assert message.startswith(f"{host.name} ({host.address}): host key not in {empty}; it offered ssh-")
    assert "SHA256:" in message and "ssh-keyscan -p 22 " + host.address in message
    assert "ssh.accept_new_host_keys: true" in message
    assert empty.read_text() == ""

    missing = tmp_path / "nowhere" / "known_hosts"
    inv = inventory(ssh_hosts, tmp_path, known_hosts=missing)
    with pytest.raises(HostKeyError, match=r"\(the file does not exist\)"):
        connect(inv.hosts[0], inv)
    assert not missing.parent.exists()


@pytest.mark.parametrize("accept", [False, True], ids=["strict", "accept-new"])
def test_changed_host_key_is_refused_even_with_accept_new(ssh_hosts, tmp_path, accept):
    host = ssh_hosts.hosts[0]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(other_key_line(tmp_path, host.address))
    before = wrong.read_text()
    inv = inventory(ssh_hosts, tmp_path, known_hosts=wrong, accept=accept)
    with pytest.raises(HostKeyError) as err:
        connect(inv.hosts[0], inv)
    message = str(err.value)
    assert f"{host.name} ({host.address}): host key CHANGED (expected ssh-ed25519 SHA256:" in message
    assert ", got ssh-ed25519 SHA256:" in message and "possible man-in-the-middle" in message
    assert f"ssh-keygen -R {host.address} -f {wrong}" in message
    assert wrong.read_text() == before


def test_a_rewritten_known_hosts_file_is_read_again_at_once(ssh_hosts, tmp_path):
    """known_hosts is parsed once per content, not per connection: a key replaced by another of the same size, within
    the file system's timestamp granularity, is still seen at the next connection (and the right one again after)."""
    host = ssh_hosts.hosts[0]
    right = next(line + "\n" for line in ssh_hosts.known_hosts.read_text().splitlines()
                 if line.startswith(host.address + " "))
    wrong = other_key_line(tmp_path, host.address)
    assert len(wrong) == len(right)
    path = tmp_path / "known_hosts"
    path.write_text(right)
    inv = inventory(ssh_hosts, tmp_path, known_hosts=path)
    for text, good in ((right, True), (wrong, False), (right, True)):
        path.write_text(text)
        if good:
            with connect(inv.hosts[0], inv) as conn:
                assert conn.run("hostname", hide=True).stdout.strip() == host.name
        else:
            with pytest.raises(HostKeyError, match="host key CHANGED"):
                connect(inv.hosts[0], inv)


def test_accept_new_records_unknown_keys_once_then_strict_mode_accepts_them(ssh_hosts, tmp_path):
    recorded = tmp_path / "new" / "known_hosts"
    inv = inventory(ssh_hosts, tmp_path, known_hosts=recorded, accept=True)
    assert check_reachable(inv.hosts, inv) == []  # all hosts at once: one line each, no lost write
    lines = recorded.read_text().splitlines()
    assert len(lines) == len(inv.hosts)
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    truth = paramiko.HostKeys(str(ssh_hosts.known_hosts))
    ours = paramiko.HostKeys(str(recorded))
    for host in inv.hosts:
        (kind, key), = ours.lookup(host.address).items()
        assert truth.lookup(host.address)[kind] == key

    strict = inventory(ssh_hosts, tmp_path, known_hosts=recorded)
    assert not strict.accept_new_host_keys
    for host in strict.hosts:
        with connect(host, strict) as conn:
            assert conn.run("hostname", hide=True, in_stream=False).stdout.strip() == host.name
    assert check_reachable(inv.hosts, inv) == []
    assert recorded.read_text().splitlines() == lines  # nothing recorded twice


def test_accept_new_appends_and_keeps_what_the_file_held(ssh_hosts, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("# my hosts\n|1|hashed= ssh-ed25519 AAAA\n192.0.2.200 " + other_key_line(tmp_path, "x").split(" ", 1)[1]
                     .rstrip("\n"))  # no final newline
    before = known.read_text()
    inv = inventory(ssh_hosts, tmp_path, known_hosts=known, accept=True)
    connect(inv.hosts[0], inv).close()
    text = known.read_text()
    assert text.startswith(before + "\n")
    assert text[len(before) + 1:].startswith(f"{inv.hosts[0].address} ssh-")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_known_hosts_that_is_not_a_file_is_refused_at_once(ssh_hosts, tmp_path, kind):
    """Read through the checked reader: a FIFO would block past SIGTERM, /dev/zero end in MemoryError."""
    path = tmp_path / "known_hosts"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    inv = inventory(ssh_hosts, tmp_path, known_hosts=path, accept=True)
    start = time.monotonic()
    with pytest.raises(HostKeyError) as err:
        connect(inv.hosts[0], inv)
    assert time.monotonic() - start < 10
    reason = "is a directory, not a known_hosts file" if kind == "folder" else (
        "not a regular file (a pipe, socket or device), so not a known_hosts file")
    assert str(err.value).endswith(f"cannot read known_hosts file {path}: {reason}"), err.value


def test_known_hosts_lines_not_utf8_or_not_base64_are_skipped_as_openssh_does(ssh_hosts, tmp_path):
    right = ssh_hosts.known_hosts.read_bytes()
    path = tmp_path / "known_hosts"
    path.write_bytes(b"caf\xe9 ssh-ed25519 AAAA\n192.0.2.7 ssh-ed25519 !!not-base64!!\n" + right)
    inv = inventory(ssh_hosts, tmp_path, known_hosts=path)
    with connect(inv.hosts[0], inv) as conn:
        assert conn.run("hostname", hide=True, in_stream=False).stdout.strip() == inv.hosts[0].name


def test_unreachable_address_fails_within_the_timeout(ssh_hosts, tmp_path):
    h1 = ssh_hosts.hosts[0]
    ghost = {"name": "ghost", "address": h1.address.rsplit(".", 1)[0] + ".99", "user": h1.user,
             "key_file": str(h1.key_file)}
    inv = inventory(ssh_hosts, tmp_path, [ghost], timeout=2)
    start = time.monotonic()
    with pytest.raises(UnreachableHost, match=r"^ghost \(.*\.99\): (no answer within 2 s|no route to host)"):
        connect(inv.get("ghost"), inv)
    assert time.monotonic() - start < 4.5


def test_closed_port_is_unreachable_not_a_hang(ssh_hosts, tmp_path):
    h1 = ssh_hosts.hosts[0]
    closed = {"name": "closed", "address": h1.address, "port": 1, "user": h1.user, "key_file": str(h1.key_file)}
    inv = inventory(ssh_hosts, tmp_path, [closed], timeout=2)
    with pytest.raises(UnreachableHost, match=r"^closed \(.*:1\): connection refused on port 1$"):
        connect(inv.get("closed"), inv)


def test_wrong_or_missing_key_file_is_an_authentication_failure(ssh_hosts, tmp_path):
    other_key_line(tmp_path, "x")
    inv = inventory(ssh_hosts, tmp_path, key_file=str(tmp_path / "other_ed25519"))
    with pytest.raises(AuthFailed, match=r"authentication failed for user root with key .*other_ed25519"):
        connect(inv.hosts[0], inv)
    inv = inventory(ssh_hosts, tmp_path, key_file=str(tmp_path / "no_such_key"))
    with pytest.raises(AuthFailed, match=r"key file .*no_such_key does not exist"):
        connect(inv.hosts[0], inv)
    (tmp_path / "keys").mkdir()
    inv = inventory(ssh_hosts, tmp_path, key_file=str(tmp_path / "keys"))
    with pytest.raises(AuthFailed, match=r"key file .*/keys is a directory, not a private key file$"):
        connect(inv.hosts[0], inv)


def test_check_reachable_names_only_the_failing_hosts(ssh_hosts, tmp_path):
    h1 = ssh_hosts.hosts[0]
    ghost = {"name": "ghost", "address": h1.address.rsplit(".", 1)[0] + ".98", "user": h1.user,
             "key_file": str(h1.key_file)}
    inv = inventory(ssh_hosts, tmp_path, [ghost], timeout=2)
    start = time.monotonic()
    problems = check_reachable(inv.hosts, inv)
    assert [(h.name, type(e)) for h, e in problems] == [("ghost", UnreachableHost)]
    assert time.monotonic() - start < 4.5  # in parallel: the good hosts do not wait for the ghost

    opened = on_all(inv.hosts, lambda h: connect(h, inv))
    for out in opened.values():
        if out.ok:
            out.value.close()
    failed = {name: out.error for name, out in opened.items() if not out.ok}
    assert list(failed) == ["ghost"] and str(failed["ghost"]).startswith("ghost (")

    good = [h for h in inv.hosts if h.name != "ghost"]
    conns = {name: out.get() for name, out in on_all(good, lambda h: connect(h, inv)).items()}
    try:
        names = values(on_all(good, lambda h: conns[h.name].run("hostname", hide=True, in_stream=False).stdout.strip()))
        assert names == [h.name for h in good]
    finally:
        for conn in conns.values():
            conn.close()


def test_users_ssh_config_is_not_read(ssh_hosts, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n    HostName 192.0.2.1\n    Port 1\n    User nobody\n")
    monkeypatch.setenv("HOME", str(home))
    inv = inventory(ssh_hosts, tmp_path)
    with connect(inv.hosts[0], inv) as conn:
        assert conn.run("hostname", hide=True, in_stream=False).stdout.strip() == inv.hosts[0].name
