"""The workshop hub's parts that start processes but need no root: the authenticator (importing
it asks ldconfig where PAM is) lets each password open its own account only and a new password
replace the old one at once; an attendee's login shell gets the environment first; --https
makes a self-signed certificate once (openssl)."""

from __future__ import annotations

from hub import settings


def authenticate(authenticator, name: str, password: str):
    """The authenticator's answer, in a thread of its own: in the same session as the browser
    tests, Playwright's event loop runs in this one."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    data = {"username": name, "password": password}
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, authenticator.authenticate(None, data)).result()


def test_each_password_opens_its_own_account_only(tmp_path):
    from hub import auth

    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"),
        roster="r.csv",
        attendees=["alice", "bob"],
        instructor="teach",
    )
    s.ensure_passwords()
    s.save()
    authenticator = auth.RosterAuthenticator(settings_file=str(s.path))

    def log_in(name, password):
        return authenticate(authenticator, name, password)

    assert log_in("alice", s.passwords["alice"]) == "alice"
    assert log_in("teach", s.admin_password) == "teach"
    for name in ("alice", "Alice", "ALICE", "teach", "carol", ""):
        assert log_in(name, s.passwords["bob"]) is None, name
    assert log_in("bob", s.admin_password) is None and log_in("bob", "") is None
    sheet = auth.write_sheet(s, [{"id": "alice", "first_name": "Alice", "last_name": "L"}])
    assert oct(sheet.stat().st_mode & 0o777) == "0o600"
    assert f"alice,Alice,L,{s.passwords['alice']}" in sheet.read_text()


def test_an_attendees_login_shell_gets_the_environment_first(tmp_path):
    import subprocess

    from hub import isolation

    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"), roster="r.csv", venv=str(tmp_path / "venv")
    )
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    profile = isolation.write_profile(s, tmp_path / "profile.sh")
    script = f". {profile}; echo $PATH"
    inside = subprocess.run(
        ["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin", "JUPYTERHUB_USER": "alice"},
        capture_output=True,
        text=True,
    )
    assert inside.stdout.strip() == f"{tmp_path}/venv/bin:/usr/bin:/bin"
    outside = subprocess.run(
        ["sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert outside.stdout.strip() == "/usr/bin:/bin"


def test_https_makes_a_self_signed_certificate_once_and_the_banner_says_how(tmp_path):
    import subprocess

    from hub import __main__ as hub_main
    from hub import tls

    cert, key, made = tls.self_signed(tmp_path)
    assert made and oct(key.stat().st_mode & 0o777) == "0o600"
    assert tls.self_signed(tmp_path)[2] is False  # kept: the attendees accepted this one
    text = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "DNS:localhost" in text and "IP Address:127.0.0.1" in text
    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"),
        roster="r.csv",
        attendees=["alice"],
        ssl_cert=str(cert),
        ssl_key=str(key),
        self_signed=True,
        memory_mib=3072,
        pids_max=1024,
        course=str(tmp_path / "course"),
    )
    shown = hub_main.banner(s, {"alice": [0]})
    assert s.url.startswith("https://") and tls.fingerprint(cert) in shown
    assert "in clear" not in shown and "memory 3.0 GiB, 1024 processes" in shown
    plain = hub_main.banner(
        settings.HubSettings(
            state_dir=str(tmp_path / "s2"), roster="r.csv", attendees=["alice"], course="c"
        ),
        {"alice": [0]},
    )
    assert "passwords cross the room's network in clear" in plain


def test_a_new_password_for_one_attendee_replaces_theirs_at_once(tmp_path, capsys):
    import argparse

    from hub import __main__ as hub_main
    from hub import auth

    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"),
        roster=str(tmp_path / "r.csv"),
        attendees=["alice", "bob"],
    )
    s.ensure_passwords()
    s.save()
    old, bobs = s.passwords["alice"], s.passwords["bob"]
    args = argparse.Namespace(state_dir=s.state_dir, name="alice")
    assert hub_main.password(args) == 0
    new = settings.load(s.path).passwords["alice"]
    assert new != old and new in capsys.readouterr().out
    assert settings.load(s.path).passwords["bob"] == bobs
    assert new in s.passwords_path.read_text() and old not in s.passwords_path.read_text()
    authenticator = auth.RosterAuthenticator(settings_file=str(s.path))
    for password, expected in ((old, None), (new, "alice")):
        assert authenticate(authenticator, "alice", password) == expected
    assert hub_main.password(argparse.Namespace(state_dir=s.state_dir, name="mallory")) == 1


def test_the_banners_commands_work_from_any_folder_and_its_url_says_who_reaches_it(tmp_path):
    from hub import __main__ as hub_main

    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"),
        roster="r.csv",
        attendees=["alice"],
        course="/c",
        memory_mib=3072,
        pids_max=1024,
    )
    shown = hub_main.banner(s, {"alice": [0]})
    commands = [line for line in shown.splitlines() if " -m hub " in line or "make grade" in line]
    assert len(commands) == 3, shown
    for line in commands:  # each carries its own folder
        assert f"cd {s.repo} && " in line, line
    assert "from other machines" in shown and "services/class-view/" in shown
    s.ip = "127.0.0.1"
    local = hub_main.banner(s, {"alice": [0]})
    assert "from other machines" not in local and "this machine only" in local


def test_down_closes_again_the_folders_make_hub_opened(tmp_path):
    from hub import __main__ as hub_main

    home = tmp_path / "home"
    inner = home / "repo"
    inner.mkdir(parents=True)
    home.chmod(0o700)
    opened = hub_main.reachable(inner / "x")
    assert str(home) in opened and home.stat().st_mode & 0o777 == 0o701
    assert hub_main.closed_again(opened) == opened
    assert home.stat().st_mode & 0o777 == 0o700


def test_the_port_guard_refuses_the_others_ports_to_a_process_in_its_cgroup():
    """A process in alice's cgroup binds her ports, port 0 and ports outside the block, on any
    address; another's port in the block fails at once with EPERM (root only: bpf, cgroups)."""
    import errno
    import os
    import subprocess
    import sys
    import uuid

    import pytest

    from hub import port_guard

    if os.geteuid() != 0 or port_guard.cgroup2_root() is None:
        pytest.skip("the port guard needs root and a cgroup v2 hierarchy")
    user = f"portguard-test-{uuid.uuid4().hex[:6]}"
    block, own = range(6100, 6160), range(6120, 6140)
    folder = port_guard.guard(user, block, own)
    probe = (
        "import socket, sys\n"
        "for port in map(int, sys.argv[1:]):\n"
        "    for family, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::')):\n"
        "        s = socket.socket(family)\n"
        "        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "        try:\n"
        "            s.bind((host, port)); print(port, 'ok')\n"
        "        except OSError as e:\n"
        "            print(port, e.errno)\n"
        "        s.close()\n"
    )
    ports = [6100, 6119, 6120, 6139, 6140, 6159, 6160, 0]
    try:
        child = subprocess.run(
            [sys.executable, "-c", probe, *map(str, ports)],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: port_guard.join(os.getpid(), user),
        )
        said = {}
        for line in child.stdout.splitlines():
            port, answer = line.split()
            said.setdefault(int(port), set()).add(answer)
        expected = {
            6100: {str(errno.EPERM)},
            6119: {str(errno.EPERM)},
            6120: {"ok"},
            6139: {"ok"},
            6140: {str(errno.EPERM)},
            6159: {str(errno.EPERM)},
            6160: {"ok"},
            0: {"ok"},
        }
        assert said == expected, child.stdout + child.stderr
    finally:
        port_guard.remove(user)
    assert not folder.exists()
