"""Several hosts, for real, without extra machines: two Linux network namespaces, one sshd each.

Each "host" (hostA, hostB) is a network namespace with its own address on a bridge in the root
namespace, where the test (and horovodrun's rendezvous server) runs:

    root namespace   wbhosts0 (bridge)  10.213.0.1 ---+--- veth --- hostA: wbhosts0 10.213.0.2
                                                      +--- veth --- hostB: wbhosts0 10.213.0.3
    hostC            10.213.0.9: nobody there (the unreachable host)

The hosts' interfaces carry the bridge's name on purpose: horovodrun takes the address of
`--network-interfaces` NAME on the launching machine for its rendezvous server and gives the
workers HOROVOD_GLOO_IFACE=NAME, so the name must exist everywhere (on a real cluster: eth0).

Each host runs its own sshd (a throw-away host key, config and authorized key in a temp
folder), in a mount namespace of its own in which the run's log folder is the host's private
"disk": what a worker writes there stays on its host, as on machines without a shared file
system. The script, the data and the Python environment are seen at the same paths everywhere.
ssh finds hostA and hostB through a private ssh config: an `ssh` early on PATH runs
`/usr/bin/ssh -F <that config>`; /etc/hosts, /etc/ssh and ~/.ssh are not touched.

After a run, nothing of it may be left on either host: not after a run that went well, nor after
an interrupt or a failing rank, when the runner stops over ssh what horovodrun's ssh clients
left behind.

Needs root, `ip` and sshd (tests/setup_sshd.sh installs Debian's openssh-server). Everything
made here is removed by the fixture's finalizer, also when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workbook import runner
from workbook.runner.command import RAW_LOG_NAME, RUN_RECORD_NAME
from workbook.runner.hosts import SSH_TIMEOUT_S

FAILS_ON_RANK_1 = Path(__file__).resolve().parents[1] / "runner_cases" / "fails_on_rank_1.py"
# Each worker counts to 3, then waits in silence: a worker that still wrote would end on its own
# (a broken pipe) once its ssh connection is gone, one that waits does not.
COUNTS = """\
import os, time
for step in range(4):
    print(f"rank {os.environ['HOROVOD_RANK']} step {step}", flush=True)
    time.sleep(0.5)
time.sleep(300)
"""

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent
SSHD = Path(os.environ.get("SSHD", "/usr/sbin/sshd"))
TINY_RUN = (
    f"--data-dir {SAMPLE} --train-images 1024 --test-images 256 --depth 10 --width 1 "
    "--epochs 1 --steps-per-epoch 8"
)

SUBNET = "10.213.0"
LINK = "wbhosts0"  # the bridge, and each host's interface (see the module's docstring)
HOSTS = {"hostA": f"{SUBNET}.2", "hostB": f"{SUBNET}.3"}
NOBODY = ("hostC", f"{SUBNET}.9")
NAMESPACE_PREFIX = "wbtest-"

# Prints where this worker runs, then runs the script given after it as __main__.
WHERE_AM_I = """\
import json, os, runpy, socket, sys
import psutil
addresses = sorted(
    a.address for addrs in psutil.net_if_addrs().values() for a in addrs if a.family == socket.AF_INET
)
print("WHERE " + json.dumps({
    "rank": int(os.environ["HOROVOD_RANK"]),
    "hostname": os.environ["HOROVOD_HOSTNAME"],
    "gethostname": socket.gethostname(),
    "gloo_interface": os.environ.get("HOROVOD_GLOO_IFACE"),
    "net_namespace": os.readlink("/proc/self/ns/net"),
    "addresses": addresses,
}), flush=True)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def ip(*args: str, namespace: str | None = None, check: bool = True):
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done


def why_no_namespaces() -> str | None:
    """Why this machine cannot host the fake hosts, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces and a bridge need root"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian: apt-get install iproute2; tests/setup_sshd.sh does it)"
    if not SSHD.is_file():
        return f"no sshd at {SSHD}: run tests/setup_sshd.sh (Debian's openssh-server)"
    probe = f"{NAMESPACE_PREFIX}probe-{os.getpid()}"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"the kernel refuses a network namespace: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    bridge = ip("link", "add", f"wbprobe{os.getpid() % 10000}", "type", "bridge", check=False)
    if bridge.returncode != 0:
        return f"the kernel refuses a bridge: {bridge.stderr.strip()}"
    ip("link", "del", f"wbprobe{os.getpid() % 10000}", check=False)
    return None


def wait_for_port(address: str, port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {address}:{port}: {error}") from None
            time.sleep(0.2)


@dataclass
class FakeHosts:
    root: Path
    disks: dict[str, Path]  # host -> the folder its private log folder really is
    shared_logs: Path  # the log folder's path, the same on every host
    ssh_bin: Path  # put first on PATH: its `ssh` knows hostA, hostB and hostC
    namespaces: dict[str, str] = field(default_factory=dict)  # host -> network namespace
    sshd: dict[str, subprocess.Popen] = field(default_factory=dict)

    def processes_in(self, namespace: str) -> list[str]:
        """The command lines of the processes in a namespace, but for its sshd."""
        daemons = {process.pid for process in self.sshd.values()}
        pids = ip("netns", "pids", namespace, check=False).stdout.split()
        commands = []
        for pid in map(int, pids):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue  # ended meanwhile
            if pid not in daemons:
                commands.append(command.decode(errors="replace").strip())
        return commands

    def namespace_inode(self, host: str) -> int:
        return os.stat(f"/run/netns/{self.namespaces[host]}").st_ino


def write_ssh_files(root: Path) -> tuple[Path, Path]:
    """The client's key, config and `ssh` wrapper; the hosts' key and authorized_keys."""
    keys = root / "keys"
    keys.mkdir(mode=0o700)
    for name in ("client_key", "host_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys / name)],
            check=True,
            timeout=30,
        )
    shutil.copyfile(keys / "client_key.pub", keys / "authorized_keys")
    config = root / "ssh_config"
    aliases = "".join(
        f"Host {name}\n    HostName {address}\n" for name, address in [*HOSTS.items(), NOBODY]
    )
    config.write_text(
        aliases + "Host *\n"
        "    User root\n"
        f"    IdentityFile {keys / 'client_key'}\n"
        "    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {root / 'known_hosts'}\n"
        "    StrictHostKeyChecking accept-new\n"
        "    BatchMode yes\n"
        "    LogLevel ERROR\n"
    )
    ssh_bin = root / "bin"
    ssh_bin.mkdir()
    wrapper = ssh_bin / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {config} "$@"\n')
    wrapper.chmod(0o755)
    return keys, ssh_bin


def sshd_config(root: Path, keys: Path, host: str, address: str) -> Path:
    path = root / f"sshd_{host}.conf"
    path.write_text(
        f"ListenAddress {address}:22\n"
        f"HostKey {keys / 'host_key'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\n"
        f"PidFile {root / f'sshd_{host}.pid'}\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"  # the temp folder's owner and modes are not sshd's business here
        "PrintMotd no\n"
        "LogLevel VERBOSE\n"
    )
    return path


def start_host(hosts: FakeHosts, keys: Path, host: str, address: str, index: int) -> None:
    namespace = f"{NAMESPACE_PREFIX}{host}-{os.getpid()}"
    outside = f"wbh{os.getpid() % 100000}{index}"  # the root namespace's end of the veth
    inside = f"{outside}i"
    ip("netns", "add", namespace)
    hosts.namespaces[host] = namespace
    ip("link", "add", outside, "type", "veth", "peer", "name", inside)
    ip("link", "set", outside, "master", LINK, "up")
    ip("link", "set", inside, "netns", namespace)
    ip("link", "set", "lo", "up", namespace=namespace)
    ip("link", "set", inside, "name", LINK, namespace=namespace)
    ip("addr", "add", f"{address}/24", "dev", LINK, namespace=namespace)
    ip("link", "set", LINK, "up", namespace=namespace)

    disk = hosts.disks[host]
    disk.mkdir()
    # Like a real machine, the host has its own name, resolving to its own address: Horovod
    # 0.28.1's Gloo finds the address of some of its connections from the hostname (not from
    # HOROVOD_GLOO_IFACE), and this machine's name resolves to 127.0.0.1.
    etc_hosts = hosts.root / f"hosts_{host}"
    etc_hosts.write_text(
        "127.0.0.1 localhost\n" + "".join(f"{a} {name}\n" for name, a in HOSTS.items())
    )
    # sshd runs in the host's network namespace and in mount and hostname (UTS) namespaces of
    # its own, where /etc/hosts is the one above and the shared log folder is this host's
    # disk; its sessions (the workers) inherit all three.
    start = (
        f"mount --bind {disk} {hosts.shared_logs} && mount --bind {etc_hosts} /etc/hosts && "
        f"hostname {host} && exec {SSHD} -D -E {hosts.root / f'sshd_{host}.log'} "
        f"-f {sshd_config(hosts.root, keys, host, address)}"
    )
    hosts.sshd[host] = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            namespace,
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            start,
        ],
        stdin=subprocess.DEVNULL,
    )
    wait_for_port(address, 22, 30)


def stop_everything(hosts: FakeHosts) -> None:
    """Stops every process in the hosts' namespaces (sshd, stray workers), then removes them."""
    for namespace in hosts.namespaces.values():
        pids = ip("netns", "pids", namespace, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for process in hosts.sshd.values():
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
    for namespace in hosts.namespaces.values():
        ip("netns", "del", namespace, check=False)  # its end of each veth goes with it
    ip("link", "del", LINK, check=False)


@pytest.fixture(scope="module")
def fake_hosts(tmp_path_factory):
    reason = why_no_namespaces()
    if reason:
        pytest.skip(reason)
    if ip("link", "show", LINK, check=False).returncode == 0:
        pytest.fail(
            f"an interface {LINK} exists already (another run of this test?): "
            f"`ip link del {LINK}` if it is a leftover"
        )
    root = tmp_path_factory.mktemp("hosts")
    shared_logs = root / "logs"
    shared_logs.mkdir()
    keys, ssh_bin = write_ssh_files(root)
    hosts = FakeHosts(
        root=root,
        disks={host: root / f"disk_{host}" for host in HOSTS},
        shared_logs=shared_logs,
        ssh_bin=ssh_bin,
    )
    try:
        # sshd refuses to start without its privilege separation folder. It stays: Debian's
        # own sshd makes the same empty folder, and another sshd may be using it by now.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        ip("link", "add", LINK, "type", "bridge")
        ip("addr", "add", f"{SUBNET}.1/24", "dev", LINK)
        ip("link", "set", LINK, "up")
        for index, (host, address) in enumerate(HOSTS.items()):
            start_host(hosts, keys, host, address, index)
        yield hosts
    finally:
        stop_everything(hosts)


@pytest.fixture
def on_path(fake_hosts, monkeypatch):
    """The ssh that knows the fake hosts first on PATH (horovodrun runs `ssh` from PATH)."""
    path = os.pathsep.join([str(fake_hosts.ssh_bin), str(VENV_BIN), os.environ.get("PATH", "")])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)
    return fake_hosts


def left_on_the_hosts(hosts: FakeHosts, seconds: float) -> dict[str, list[str]]:
    """What runs on each host but its sshd, after waiting up to `seconds` for it to end."""
    deadline = time.monotonic() + seconds
    while True:
        left = {host: hosts.processes_in(namespace) for host, namespace in hosts.namespaces.items()}
        if not any(left.values()) or time.monotonic() > deadline:
            return {host: commands for host, commands in left.items() if commands}
        time.sleep(0.5)


def where_lines(output: str) -> dict[int, dict]:
    found = [json.loads(m) for m in re.findall(r"WHERE (\{.*\})", output)]
    return {where["rank"]: where for where in found}


def test_run_on_two_hosts(on_path, tmp_path):
    hosts = on_path
    where_am_i = tmp_path / "where_am_i.py"
    where_am_i.write_text(WHERE_AM_I)
    log_dir = hosts.shared_logs / "two-hosts"
    started = time.monotonic()
    result = runner.horovodrun(
        # No --network-interfaces: horovodrun's own search must find the common interface.
        # --disable-cache: search now, not in ~/.horovod's results of an earlier run.
        f"-H hostA:1,hostB:1 --disable-cache {where_am_i} {SOLUTION} {TINY_RUN} "
        f"--log-dir {log_dir}",
        np=2,
        cwd=tmp_path,
        timeout=600,
        quiet=True,
    )
    seconds = time.monotonic() - started
    raw = result.log_path.read_text(errors="replace")
    assert result.ok, f"{result}\n\n{raw[-3000:]}"
    assert "--start-timeout 60" in result.command  # bounded, since the hosts are remote
    assert 0 < result.metrics["test_accuracy"] <= 1 and result.metrics["epochs"] == 1

    # Each rank ran on its own host: in that host's network namespace, with its address.
    where = where_lines(raw)
    assert sorted(where) == [0, 1], raw[-3000:]
    for rank, host in enumerate(HOSTS):
        assert where[rank]["hostname"] == where[rank]["gethostname"] == host
        assert where[rank]["gloo_interface"] == LINK
        assert where[rank]["net_namespace"] == f"net:[{hosts.namespace_inode(host)}]"
        assert HOSTS[host] in where[rank]["addresses"]
    assert where[0]["net_namespace"] != os.readlink("/proc/self/ns/net")

    # Only rank 0 (on hostA) wrote checkpoints and TensorBoard logs, on its own disk; the
    # launcher's folder of the same name holds the runner's own files alone.
    on_a = sorted(p.name for p in (hosts.disks["hostA"] / "two-hosts").glob("checkpoint-*.h5"))
    assert on_a == ["checkpoint-1.h5"]
    assert list((hosts.disks["hostA"] / "two-hosts").glob("train/events.out.tfevents.*"))
    on_b = hosts.disks["hostB"] / "two-hosts"
    assert not on_b.exists() or not any(on_b.rglob("*")), sorted(on_b.rglob("*"))
    assert sorted(p.name for p in log_dir.iterdir()) == sorted([RAW_LOG_NAME, RUN_RECORD_NAME])

    # Nothing of the run is left on the hosts: only their sshd.
    assert left_on_the_hosts(hosts, 20) == {}
    print(f"two hosts: {seconds:.0f} s")


def test_an_interrupted_run_leaves_nothing_on_either_host(on_path, tmp_path):
    hosts = on_path
    (tmp_path / "counts.py").write_text(COUNTS)
    handle = runner.start_in_background(
        f"-H hostA:1,hostB:1 --network-interfaces {LINK} counts.py",
        np=2,
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        timeout=600,
    )
    deadline = time.monotonic() + 240
    while not ("rank 0 step 3" in handle.tail(20) and "rank 1 step 3" in handle.tail(20)):
        assert time.monotonic() < deadline and not handle.done, handle.tail(20)
        time.sleep(0.5)
    # Both workers run on their hosts, under sshd: ssh gives them no terminal, and stopping the
    # local ssh clients (what stopping horovodrun does) would leave them there.
    assert all(
        any("counts.py" in c for c in hosts.processes_in(n)) for n in hosts.namespaces.values()
    )
    stopped = time.monotonic()
    result = handle.stop(timeout=60)
    assert result.interrupted and result.leftover_pids == [] and result.leftover_remote == {}
    assert left_on_the_hosts(hosts, 5) == {}
    assert time.monotonic() - stopped < 40


def test_a_failing_rank_leaves_nothing_on_either_host(on_path, tmp_path):
    """Rank 1 (hostB) fails; rank 0 (hostA) would wait a minute: horovodrun stops only its ssh."""
    hosts = on_path
    started = time.monotonic()
    result = runner.horovodrun(
        f"-H hostA:1,hostB:1 --network-interfaces {LINK} {FAILS_ON_RANK_1} x",
        np=2,
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        timeout=300,
        quiet=True,
    )
    assert result.failed_rank == 1, f"{result}\n{result.log_path.read_text()[-3000:]}"
    assert "RuntimeError: rank 1 fails on purpose" in result.error
    assert result.leftover_remote == {}
    assert left_on_the_hosts(hosts, 5) == {}
    assert time.monotonic() - started < 60  # well before rank 0's minute is up


def test_unreachable_host_is_named_at_once(on_path, tmp_path):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    started = time.monotonic()
    with pytest.raises(runner.HostsUnreachable) as raised:
        runner.horovodrun(
            f"-H hostA:1,{NOBODY[0]}:1 --network-interfaces {LINK} train.py",
            np=2,
            cwd=tmp_path,
            logs_root=tmp_path / "logs",
            quiet=True,
        )
    seconds = time.monotonic() - started
    message = str(raised.value)
    assert seconds < 60, f"took {seconds:.0f} s"
    assert seconds <= SSH_TIMEOUT_S + 5
    assert "ssh cannot reach hostC (hostC: ssh: connect to host 10.213.0.9 port 22" in message
    assert "hostA" not in message.split("(")[0]  # the reachable host is not blamed
    assert "\n" not in message
    assert not (tmp_path / "logs").exists()  # horovodrun never started
    print(f"unreachable host reported in {seconds:.1f} s: {message}")
