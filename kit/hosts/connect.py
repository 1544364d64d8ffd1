"""The one module that touches SSH: HostConfig -> an open fabric Connection, host keys checked strictly.

Host keys. Each connection checks the server's key against ONE known_hosts file: the inventory's
`ssh.known_hosts`, or ~/.ssh/known_hosts. An unknown key is refused (HostKeyError saying how to add
it after checking it); a changed key is always refused. With `ssh.accept_new_host_keys: true` (or
KIT_ACCEPT_NEW_HOST_KEYS=1) an UNKNOWN key is recorded on first use: one line appended to that file,
nothing else in it rewritten, like OpenSSH's StrictHostKeyChecking=accept-new; a CHANGED key is
still refused. The user's ~/.ssh/config and fabric config files are not read: hosts.yaml alone
says where and how to connect.

Authentication: the host's key_file only, or (key_file unset) ssh-agent and the default keys.
Failures are exceptions naming the host: HostKeyError, UnreachableHost, AuthFailed.

Remote command lines. Every command sent to a host is built with quote_cmd (argv -> one POSIX
shell line, each word quoted by shlex), with remote_env for environment variables and
remote_command for both plus a working directory. Never format a value into a command string by
hand, and do not use fabric's run(env=...) (it does not quote): host names, users, paths and data
dirs may hold spaces or shell metacharacters, and quoting is what keeps them data. sshd runs the
line with the remote user's login shell, which must be POSIX-compatible (sh, dash, bash, zsh).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import paramiko
from fabric import Config, Connection
from fabric.runners import Remote
from invoke.exceptions import CommandTimedOut
from paramiko.config import SSHConfig

from kit.config.inventory import HostConfig, Inventory
from kit.core.inputs import InputError, KitError, read_input
from kit.hosts.fanout import on_all

log = logging.getLogger(__name__)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KNOWN_HOSTS_LOCK = threading.Lock()
KNOWN_HOSTS_BYTES = 64 * 2**20  # far above a fleet's (about 100 bytes a host key)


class InventoryError(KitError):
    """One host cannot be used; str() is 'name (address): reason'."""

    def __init__(self, host: HostConfig, reason: str):
        self.host, self.reason = host, reason
        super().__init__(f"{host.label}: {reason}")


class HostKeyError(InventoryError):
    """The host's key is unknown (strict mode) or differs from the recorded one."""


class UnreachableHost(InventoryError):
    """No SSH server answered: timeout, refused, no route, unresolvable name, broken handshake."""


class AuthFailed(InventoryError):
    """The server refused the key (or the agent's keys), or the key file cannot be used."""


# --- command lines ---------------------------------------------------------------------------

def quote_cmd(argv: Sequence[str | os.PathLike | int]) -> str:
    """argv -> one POSIX shell command line in which every word stays exactly one word (shlex.join).

    THE way every remote command line is built. argv[0] must not start with '-'; no word may hold
    a NUL byte (it cannot be passed through exec). Paths and ints are converted with str().
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise ValueError(f"argv must be a non-empty list of words, got {argv!r}")
    words = []
    for word in argv:
        if isinstance(word, bool) or not isinstance(word, (str, os.PathLike, int)):
            raise ValueError(f"argv word {word!r} is not a string, path or int")
        text = os.fspath(word) if isinstance(word, os.PathLike) else str(word)
        if isinstance(text, bytes) or "\x00" in text:
            raise ValueError(f"argv word {text!r} holds a NUL byte or is bytes")
        words.append(text)
    if words[0].startswith("-"):
        raise ValueError(f"argv[0] {words[0]!r} starts with '-': not a program name")
    return shlex.join(words)


def remote_env(env: Mapping[str, str | os.PathLike | int | float]) -> str:
    """{'K': 'v w'} -> "env 'K=v w'": a prefix for quote_cmd's line; '' for no variables.

    Names must match [A-Za-z_][A-Za-z0-9_]*; values are quoted, so any text (but NUL) is safe.
    """
    words = []
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            raise ValueError(f"environment variable name {key!r} is not [A-Za-z_][A-Za-z0-9_]*")
        if isinstance(value, bool) or not isinstance(value, (str, os.PathLike, int, float)):
            raise ValueError(f"environment variable {key}: value {value!r} is not a string, path or number")
        text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        if "\x00" in text:
            raise ValueError(f"environment variable {key}: value holds a NUL byte")
        words.append(shlex.quote(f"{key}={text}"))
    return "env " + " ".join(words) if words else ""


def remote_command(argv: Sequence[str | os.PathLike | int], env: Mapping | None = None,
                   cwd: str | os.PathLike | None = None) -> str:
    """`cd -- CWD && env K=V ARGV...`, every part quoted; cwd and env are optional."""
    parts = [f"cd -- {shlex.quote(os.fspath(cwd))} &&"] if cwd is not None else []
    prefix = remote_env(env or {})
    return " ".join(parts + ([prefix] if prefix else []) + [quote_cmd(argv)])


# --- host keys -------------------------------------------------------------------------------

def _fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class _StrictPolicy(paramiko.MissingHostKeyPolicy):
    def __init__(self, host: HostConfig, path: Path):
        self.host, self.path = host, path

    def missing_host_key(self, client, hostname, key):
        missing = "" if self.path.exists() else " (the file does not exist)"
        scan = f"ssh-keyscan -p {self.host.port} {shlex.quote(self.host.address)} >> {shlex.quote(str(self.path))}"
        raise HostKeyError(self.host, f"host key not in {self.path}{missing}; it offered {_fingerprint(key)}: verify "
                                      f"that out of band and add it ({scan}), or set ssh.accept_new_host_keys: true "
                                      "to record it on first use")


class _AcceptNewPolicy(_StrictPolicy):
    """Unknown host: append its key to the known_hosts file. (A changed key never reaches a policy.)"""

    def missing_host_key(self, client, hostname, key):
        with _KNOWN_HOSTS_LOCK:
            before = _known_hosts_bytes(self.host, self.path)
            recorded = _recorded_keys(_parse_known_hosts(before), hostname)
            if key.get_name() in recorded and recorded[key.get_name()] != key:  # another thread recorded one
                raise _changed(self.host, self.path, recorded[key.get_name()], key)
            if key.get_name() not in recorded:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a") as f:
                    newline = bool(before) and not before.endswith(b"\n")
                    f.write(("\n" if newline else "") + f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("%s: recorded new host key %s in %s (accept_new_host_keys)", self.host.label,
                    _fingerprint(key), self.path)


def _known_hosts_name(host: HostConfig) -> str:
    """The host's name in known_hosts, as OpenSSH and paramiko write and look it up."""
    return host.address if host.port == 22 else f"[{host.address}]:{host.port}"


def _changed(host: HostConfig, path: Path, expected: paramiko.PKey, got: paramiko.PKey) -> HostKeyError:
    entry = _known_hosts_name(host)
    return HostKeyError(host, f"host key CHANGED (expected {_fingerprint(expected)}, got {_fingerprint(got)}); "
                              "refusing — possible man-in-the-middle. If the host was reinstalled, verify the new "
                              f"key out of band, then remove the old one (ssh-keygen -R {shlex.quote(entry)} -f "
                              f"{shlex.quote(str(path))})")


def _known_hosts_bytes(host: HostConfig, path: Path) -> bytes | None:
    """The file's bytes through the checked reader (a regular file of at most KNOWN_HOSTS_BYTES: a FIFO would
    block, /dev/zero exhaust memory); None when it does not exist yet."""
    if not os.path.lexists(path):
        return None
    try:
        return read_input(path, "known_hosts file", max_bytes=KNOWN_HOSTS_BYTES)
    except InputError as exc:
        raise HostKeyError(host, f"cannot read known_hosts file {path}: {exc.reason}") from None


def _parse_known_hosts(data: bytes | None) -> list[paramiko.hostkeys.HostKeyEntry]:
    """The entries of a known_hosts file's bytes; as OpenSSH, a line that is not a key of a known type is skipped."""
    entries = []
    for number, raw in enumerate((data or b"").split(b"\n"), 1):
        line = raw.decode("utf-8", errors="replace").strip()
        if not line or line.startswith("#"):
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey):
            continue
        if entry is not None:
            entries.append(entry)
    return entries


def _recorded_keys(entries: list[paramiko.hostkeys.HostKeyEntry], name: str) -> dict[str, paramiko.PKey]:
    """{key type: key} the entries record for `name` (plain or hashed), the first of each type counting."""
    keys: dict[str, paramiko.PKey] = {}
    for entry in entries:
        if any(h == name or (h.startswith("|1|") and paramiko.HostKeys.hash_host(name, h) == h)
               for h in entry.hostnames):
            keys.setdefault(entry.key.get_name(), entry.key)
    return keys


_PARSED_KNOWN_HOSTS: dict[Path, tuple[bytes, list]] = {}  # path -> (its bytes, their entries)
_PARSED_KNOWN_HOSTS_LOCK = threading.Lock()


def _host_keys_of(host: HostConfig, path: Path, into: paramiko.HostKeys) -> None:
    """The keys path records for host, loaded into `into` (cleared first). The file is parsed once per content, not
    per connection: paramiko's parse grows with the square of its lines, and each host of a fleet connects."""
    data = _known_hosts_bytes(host, path)
    into.clear()
    if data is None:
        return
    with _PARSED_KNOWN_HOSTS_LOCK:
        parsed = _PARSED_KNOWN_HOSTS.get(path)
        if parsed is None or parsed[0] != data:
            parsed = _PARSED_KNOWN_HOSTS[path] = (data, _parse_known_hosts(data))
    name = _known_hosts_name(host)
    for keytype, key in _recorded_keys(parsed[1], name).items():
        into.add(name, keytype, key)


# --- connections -----------------------------------------------------------------------------

def _fabric_config() -> Config:
    """No ~/.ssh/config, no /etc/fabric.yml: the inventory alone decides how to connect.

    Remote commands get no local stdin (run.in_stream False): they are not interactive, and one
    terminal cannot feed many hosts at once. Pass in_stream= to run() to give a command input.
    """
    return Config(ssh_config=SSHConfig(), lazy=True,
                  overrides={"load_ssh_configs": False, "run": {"in_stream": False}, "runners": {"remote": _Remote}})


class _Remote(Remote):
    """fabric's runner of a remote command, whose kill at a run's timeout finds a connection already closed (the
    command ended, or was stopped, as the timer fired) quietly: nothing is left to kill, and fabric's timer thread
    would print an EOFError traceback on the user's terminal."""

    def kill(self) -> None:
        try:
            super().kill()
        except (EOFError, OSError, paramiko.SSHException):
            pass


_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux


class _QuickAckSocket(socket.socket):
    """A TCP socket that acknowledges what it reads at once (TCP_QUICKACK, re-armed after each read). Right after
    login OpenSSH's server sends small messages (hostkeys-00, debug) and holds its next reply (Nagle) until they are
    acknowledged: the client's delayed ACK put that off ~40 ms, on every connection's first command."""

    def recv(self, bufsize, flags=0):
        data = super().recv(bufsize, flags)
        self.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        return data


# AES-GCM first: an AEAD cipher authenticates in the cipher's own C code, where CTR + HMAC runs the MAC in Python on
# every packet. CBC modes, 3DES and MD5/SHA1-96 MACs are not offered (weak; OpenSSH has had all of these since 2013).
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr")
MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512",
        "hmac-sha1")


def _tcp_transport(sock, **kwargs) -> paramiko.Transport:
    """paramiko's Transport over sock with TCP_NODELAY (as OpenSSH's ssh sets it) and quick ACKs: SSH's many small
    packets, held by Nagle's algorithm until the peer's delayed ACK, stalled each handshake step and command ~40 ms.
    Its ciphers and MACs: CIPHERS and MACS, in that order."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if _TCP_QUICKACK is not None:
            timeout = sock.gettimeout()
            sock = _QuickAckSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
            sock.settimeout(timeout)
    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    options.ciphers, options.digests = CIPHERS, MACS
    return transport


class HostConnection(Connection):
    """A fabric Connection bound to one inventory host, its host-key policy and its timeouts.

    open() (also run on first use by run/put/get) raises HostKeyError, UnreachableHost or AuthFailed.
    """

    def __init__(self, host: HostConfig, inv: Inventory):
        auth = ({"key_filename": host.key_file, "allow_agent": False, "look_for_keys": False} if host.key_file
                else {"allow_agent": True, "look_for_keys": True})
        timeouts = {"timeout": inv.connect_timeout, "banner_timeout": inv.connect_timeout,
                    "auth_timeout": inv.connect_timeout}
        super().__init__(host.address, user=host.user, port=host.port, config=_fabric_config(),
                         connect_kwargs={**auth, **timeouts, "transport_factory": _tcp_transport},
                         forward_agent=False)
        # _set: plain attributes (a Connection's attribute assignment stores a name it lacks as a config key)
        self._set(kit_host=host, kit_inventory=inv, known_hosts_path=inv.known_hosts_file())
        policy = _AcceptNewPolicy if inv.accept_new_host_keys else _StrictPolicy
        self.client.set_missing_host_key_policy(policy(host, self.known_hosts_path))

    def open(self):
        if self.is_connected:
            return None
        host, path = self.kit_host, self.known_hosts_path
        if host.key_file and not os.path.isfile(host.key_file):
            why = "is a directory, not a private key file" if os.path.isdir(host.key_file) else \
                "is not a regular file (a private key file)" if os.path.exists(host.key_file) else "does not exist"
            raise AuthFailed(host, f"key file {host.key_file} {why}")
        _host_keys_of(host, path, self.client.get_host_keys())
        try:
            return super().open()
        except InventoryError:
            self.client.close()
            raise
        except Exception as exc:
            transport = self.client.get_transport()
            converted = _convert(host, self.kit_inventory, path, exc, bool(transport and transport.is_active()))
            self.client.close()
            if converted is exc:
                raise
            raise converted from exc

    def run(self, command: str, **kwargs):
        """Connection.run; a command past its `timeout` always raises CommandTimedOut. (invoke's timer closes the
        channel and only then counts as expired: a result read in between came back as an ordinary exit -1.)"""
        timeout = kwargs.get("timeout")
        t0 = time.monotonic()
        result = super().run(command, **kwargs)
        if timeout is not None and result is not None and result.exited == -1 and time.monotonic() - t0 >= timeout:
            raise CommandTimedOut(result, timeout=timeout)
        return result

    def sftp(self):
        """The SFTP session (file copies), or InventoryError naming the host when its server offers none."""
        try:
            return super().sftp()
        except paramiko.SSHException as exc:
            raise InventoryError(self.kit_host, f"its SSH server opens no SFTP session ({exc or 'refused'}); the kit "
                                 "copies files over SFTP: enable it in the host's sshd_config (Subsystem sftp ...)"
                                 ) from exc


def _convert(host: HostConfig, inv: Inventory, path: Path, exc: Exception, authenticating: bool) -> Exception:
    """paramiko/socket exception -> ours; `authenticating`: the SSH transport was up when it happened."""
    who = f"user {host.user} with " + (f"key {host.key_file}" if host.key_file else "ssh-agent / default keys")
    if isinstance(exc, paramiko.BadHostKeyException):
        return _changed(host, path, exc.expected_key, exc.key)
    if isinstance(exc, paramiko.PasswordRequiredException):
        return AuthFailed(host, f"key {host.key_file} is passphrase-protected: load it into ssh-agent (ssh-add) and "
                                "leave key_file unset")
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthFailed(host, f"authentication failed for {who} ({exc})")
    if authenticating and isinstance(exc, paramiko.SSHException):
        return AuthFailed(host, f"cannot authenticate {who} ({exc})")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {e.errno for e in exc.errors.values()}
        reason = "connection refused" if codes == {errno.ECONNREFUSED} else "no route to host"
        return UnreachableHost(host, f"{reason} on port {host.port}")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return UnreachableHost(host, f"no answer within {inv.connect_timeout:g} s (ssh.connect_timeout)")
    if isinstance(exc, socket.gaierror):
        return UnreachableHost(host, f"cannot resolve {host.address!r} ({exc.strerror})")
    if isinstance(exc, OSError):
        return UnreachableHost(host, exc.strerror or str(exc))
    if isinstance(exc, (paramiko.SSHException, EOFError)):
        return UnreachableHost(host, f"port {host.port} answered but the SSH handshake failed ({exc or 'EOF'})")
    return exc


def connect(host: HostConfig, inv: Inventory) -> HostConnection:
    """An OPEN connection to host (raises HostKeyError, UnreachableHost or AuthFailed)."""
    conn = HostConnection(host, inv)
    conn.open()
    return conn


def check_reachable(hosts: Iterable[HostConfig], inv: Inventory) -> list[tuple[HostConfig, InventoryError]]:
    """Connect to every host at once and run `true`: the hosts that fail, with why, in the order given.

    An empty list means every host answered with a known host key, accepted the key and ran a command.
    """
    def probe(host: HostConfig) -> None:
        with connect(host, inv) as conn:
            try:
                result = conn.run("true", hide=True, warn=True, in_stream=False, timeout=inv.connect_timeout * 3)
            except Exception as exc:  # a channel that cannot open, a shell that hangs: unusable either way
                raise InventoryError(host, f"connected, but running a command failed ({type(exc).__name__}: "
                                           f"{exc})") from exc
            if result.exited != 0:
                detail = (result.stderr or result.stdout).strip().splitlines()
                raise InventoryError(host, f"logged in as {host.user} but a command failed (exit {result.exited}"
                                           f"{': ' + detail[-1] if detail else ''}); is the login shell usable?")

    hosts = list(hosts)
    results = on_all(hosts, probe)
    failed = [(h, results[h.name].error) for h in hosts if not results[h.name].ok]
    for _, exc in failed:
        if not isinstance(exc, InventoryError):  # anything but an unusable host is raised
            raise exc
    return failed


__all__ = ["AuthFailed", "HostConnection", "HostKeyError", "InventoryError", "UnreachableHost", "check_reachable",
           "connect", "quote_cmd", "remote_command", "remote_env"]
