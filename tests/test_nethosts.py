"""The SSH test hosts themselves (tests/nethosts.py): real sshd in network namespaces."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nethosts
import paramiko
import pytest
from nethosts import HostsBusy, NetHosts, TestHost, start_free

TESTS = Path(__file__).resolve().parent


def connect(net: NetHosts, host: TestHost) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(net.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host.address, port=host.port, username=host.user, key_filename=str(host.key_file),
                   look_for_keys=False, allow_agent=False, timeout=5, banner_timeout=5, auth_timeout=5)
    return client


def sh(client: paramiko.SSHClient, cmd: str) -> tuple[int, str]:
    _, stdout, _ = client.exec_command(cmd, timeout=10)
    out = stdout.read().decode()
    return stdout.channel.recv_exit_status(), out


def netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (reaped later by init) is dead too
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_hosts_layout(ssh_hosts: NetHosts) -> None:
    assert [h.name for h in ssh_hosts.hosts] == ["h1", "h2", "h3"]
    assert len({h.address for h in ssh_hosts.hosts}) == 3
    for h in ssh_hosts.hosts:
        assert (h.port, h.user, h.nic) == (22, "root", "eth0")
        assert h.key_file.is_file() and h.bin_dir.is_dir()
        assert h.netns in netns_names()
        assert h.address in ssh_hosts.run(h.name, ["ip", "-br", "addr", "show", "dev", h.nic]).stdout
    assert ssh_hosts.startup_s is not None and ssh_hosts.startup_s < 5


def test_each_host_has_its_hostname_and_env(ssh_hosts: NetHosts) -> None:
    for h in ssh_hosts.hosts:
        with connect(ssh_hosts, h) as c:
            assert sh(c, "hostname") == (0, f"{h.name}\n")
            assert sh(c, "echo $KIT_TEST_HOST") == (0, f"{h.name}\n")
            rc, path = sh(c, "echo $PATH")
            assert path.startswith(f"{h.bin_dir}:"), path
            assert sh(c, "id -u") == (0, "0\n")


def test_stub_in_bin_dir_comes_first_on_path(ssh_hosts: NetHosts) -> None:
    h = ssh_hosts.hosts[1]
    stub = h.bin_dir / "uname"  # shadows the real /usr/bin/uname
    stub.write_text("#!/bin/sh\necho stub\n")
    stub.chmod(0o755)
    try:
        with connect(ssh_hosts, h) as c:
            assert sh(c, "command -v uname") == (0, f"{stub}\n")
            assert sh(c, "uname") == (0, "stub\n")
        other = ssh_hosts.hosts[0]  # each host has its own bin_dir
        with connect(ssh_hosts, other) as c:
            assert sh(c, "command -v uname")[1].strip() != str(stub)
        assert ssh_hosts.run(h.name, ["uname"]).stdout == "stub\n"  # run() sees the same PATH
    finally:
        stub.unlink()


def test_unknown_host_key_is_refused(ssh_hosts: NetHosts) -> None:
    h = ssh_hosts.hosts[0]
    client = paramiko.SSHClient()  # empty known_hosts
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        client.connect(h.address, username=h.user, key_filename=str(h.key_file), look_for_keys=False,
                       allow_agent=False, timeout=5)
    client.close()


def test_wrong_host_key_is_refused(ssh_hosts: NetHosts, tmp_path: Path) -> None:
    h1, h2 = ssh_hosts.hosts[:2]
    h1_line = next(line for line in ssh_hosts.known_hosts.read_text().splitlines() if line.startswith(h1.address + " "))
    known = tmp_path / "known_hosts"
    known.write_text(h1_line.replace(h1.address, h2.address, 1) + "\n")  # h1's key claimed for h2
    client = paramiko.SSHClient()
    client.load_host_keys(str(known))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.BadHostKeyException):
        client.connect(h2.address, username=h2.user, key_filename=str(h2.key_file), look_for_keys=False,
                       allow_agent=False, timeout=5)
    client.close()


def test_only_publickey_auth_is_offered(ssh_hosts: NetHosts) -> None:
    h = ssh_hosts.hosts[0]
    with socket.create_connection((h.address, h.port), timeout=5) as s:
        t = paramiko.Transport(s)
        try:
            t.start_client(timeout=5)
            with pytest.raises(paramiko.BadAuthenticationType) as e:
                t.auth_none("root")
            assert e.value.allowed_types == ["publickey"]
        finally:
            t.close()
    client = paramiko.SSHClient()
    client.load_host_keys(str(ssh_hosts.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.AuthenticationException):
        client.connect(h.address, username="root", password="root", look_for_keys=False, allow_agent=False,
                       timeout=5)
    client.close()


def test_openssh_client_with_generated_config(ssh_hosts: NetHosts) -> None:
    cfg = ssh_hosts.ssh_config()
    r = subprocess.run(["ssh", "-F", str(cfg), "h2", "hostname"], capture_output=True, text=True, timeout=20)
    assert (r.returncode, r.stdout) == (0, "h2\n"), r.stderr
    # strict checking: the same host with an empty known_hosts is refused, not trusted on first use
    r = subprocess.run(["ssh", "-F", str(cfg), "-o", "UserKnownHostsFile=/dev/null", "h2", "hostname"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 255 and "Host key verification failed" in r.stderr


def test_hosts_reach_each_other(ssh_hosts: NetHosts) -> None:
    h1, h2, h3 = ssh_hosts.hosts
    probe = "import socket, sys; socket.create_connection((sys.argv[1], 22), timeout=3).close(); print('ok')"
    r = ssh_hosts.run(h1.name, [sys.executable, "-c", probe, h2.address])
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    assert ssh_hosts.run(h1.name, ["hostname"]).stdout == "h1\n"
    # and over SSH: h3 -> h2 with the client key and known_hosts (a fabric-style hop)
    with connect(ssh_hosts, h3) as c:
        rc, out = sh(c, f"ssh -i {h3.key_file} -o UserKnownHostsFile={ssh_hosts.known_hosts} "
                        f"-o StrictHostKeyChecking=yes -o BatchMode=yes root@{h2.address} hostname")
        assert (rc, out) == (0, "h2\n")


def test_each_host_sees_only_its_own_processes(ssh_hosts: NetHosts) -> None:
    h1, h2 = ssh_hosts.hosts[:2]
    with connect(ssh_hosts, h2) as c:
        # the pid is printed once the child has exec'd sleep (before that, ps shows it as [nohup])
        rc, pid = sh(c, "nohup sleep 31.5 >/dev/null 2>&1 & p=$!; for _ in $(seq 200); do "
                        "grep -aq '^sleep' /proc/$p/cmdline 2>/dev/null && break; sleep 0.02; done; echo $p")
    try:
        assert "sleep 31.5" in ssh_hosts.run(h2.name, ["ps", "-eo", "pid,args"]).stdout
        assert "sleep 31.5" not in ssh_hosts.run(h1.name, ["ps", "-eo", "pid,args"]).stdout
        with connect(ssh_hosts, h1) as c:
            assert "sleep 31.5" not in sh(c, "ps -eo pid,args")[1]
        sshd = ssh_hosts.run(h2.name, ["ps", "-o", "args=", "-p", "1"]).stdout
        assert "sshd" in sshd  # sshd is PID 1 of the host
    finally:
        ssh_hosts.run(h2.name, ["kill", pid.strip()])


def test_missing_tools_raise_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nethosts, "_which", lambda tool: None if tool == "sshd" else "/usr/bin/" + tool)
    net = NetHosts(1, tmp_path, prefix="kz", subnet="172.31.215")
    with pytest.raises(RuntimeError, match=r"sshd \(Debian package openssh-server\)"):
        net.start()
    net.close()
    assert "kz-h1" not in netns_names()


@pytest.fixture
def own_hosts(tmp_path: Path):
    """A private pair of hosts to stop/start (the shared session fixture is left alone)."""
    net = start_free(2, tmp_path / "own", prefix="ku", subnet="172.31.214")
    try:
        yield net
    finally:
        net.close()


def test_stop_host_kills_everything_and_start_host_brings_it_back(own_hosts: NetHosts) -> None:
    net = own_hosts
    h1, h2 = net.hosts
    with connect(net, h2) as c:  # something left running on h2, as a training job would be
        sh(c, "nohup sleep 300 >/dev/null 2>&1 &")
    pids = net.pids("h2")
    assert len(pids) >= 2  # sshd + sleep
    net.stop_host("h2")
    assert net.pids("h2") == []
    assert not any(alive(p) for p in pids)
    t0 = time.monotonic()
    with pytest.raises(OSError):  # refused at once, not a timeout
        socket.create_connection((h2.address, 22), timeout=5).close()
    assert time.monotonic() - t0 < 1
    with connect(net, h1) as c:  # the other host is untouched
        assert sh(c, "hostname") == (0, "h1\n")
    net.start_host("h2")
    with connect(net, h2) as c:  # same host key: known_hosts still matches
        assert sh(c, "hostname") == (0, "h2\n")


def test_second_run_on_same_prefix_is_refused_and_close_cleans_up(own_hosts: NetHosts, tmp_path: Path) -> None:
    net = own_hosts
    with pytest.raises(HostsBusy, match="in use by another live run"):
        NetHosts(1, tmp_path / "again", prefix=net.prefix, subnet="172.31.250").start()
    sshd_pids = [p for h in net.hosts for p in net.pids(h.name)]
    net.close()
    net.close()  # idempotent
    assert not [ns for ns in netns_names() if ns.startswith(net.prefix + "-")]
    assert not Path(f"/sys/class/net/{net.prefix}br0").exists()
    assert not any(alive(p) for p in sshd_pids)


def test_leftovers_of_a_crashed_run_are_removed(tmp_path: Path) -> None:
    crash = textwrap.dedent("""
        import os, sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[1])
        from nethosts import start_free
        net = start_free(1, Path(sys.argv[2]), prefix="kc", subnet="172.31.216")
        print(net.prefix, net.subnet, *net.pids("h1"), flush=True)
        os._exit(0)  # no close(): namespaces and sshd stay behind
    """)
    r = subprocess.run([sys.executable, "-c", crash, str(TESTS), str(tmp_path / "crashed")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    prefix, subnet, *pids = r.stdout.split()
    left = [int(p) for p in pids]
    assert f"{prefix}-h1" in netns_names() and any(alive(p) for p in left)
    net = NetHosts(1, tmp_path / "next", prefix=prefix, subnet=subnet)  # its locks died with the process
    with net:
        assert not any(alive(p) for p in left)
        with connect(net, net.hosts[0]) as c:
            assert sh(c, "hostname") == (0, "h1\n")
    assert f"{prefix}-h1" not in netns_names()
