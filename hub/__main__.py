"""The workshop hub's command line (root).

    python -m hub up --roster roster.csv [--port 8000] [--https | --ssl-cert F --ssl-key F]
                     [--memory-per-attendee 3G] [--pids-per-attendee 1024]
                     [--instructor NAME] [--state-dir DIR]        what `make hub` runs
    python -m hub status [--state-dir DIR]                        the URL, or that it is stopped
    python -m hub password NAME [--state-dir DIR]                 a new password for NAME
    python -m hub down [--remove-accounts] [--state-dir DIR]      stop it (and delete the accounts)

`up` is idempotent: it installs what is missing, makes what is missing (accounts, passwords,
CPU sets, limits, the exchange, the course) and starts JupyterHub unless it runs; the passwords
stay the same.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path

from hub import (
    accounts,
    auth,
    classroom,
    cores,
    isolation,
    kernel_limits,
    limits,
    progress_drop,
    roster,
    server,
    settings,
    tls,
)
from workbook.facts import notebook_label

SETUP_PROXY = Path(__file__).with_name("setup_proxy.sh")


def reachable(path: Path) -> list[str]:
    """Let other accounts pass through the folders above `path` (o+x, not o+r: they cannot
    list them), so that attendees can run the shared environment. The folders changed (`down`
    closes them again: closed_again)."""
    changed = []
    for folder in reversed(Path(path).resolve().parents):
        if not folder.is_dir():
            break  # made later, by the hub (with the mode it needs)
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
            changed.append(str(folder))
    return changed


def closed_again(folders: list[str]) -> list[str]:
    """The folders `reachable` opened, closed to other accounts again (o-x); those closed."""
    closed = []
    for folder in map(Path, folders):
        try:
            folder.chmod(folder.stat().st_mode & ~stat.S_IXOTH)
            closed.append(str(folder))
        except OSError:
            pass  # gone meanwhile
    return closed


def where_from(s: settings.HubSettings) -> str:
    """Who can reach the URL: a hub bound to the loopback is this machine's only."""
    if s.ip in ("0.0.0.0", "", "::"):
        return "from other machines: this host's name or address"
    if s.ip.startswith("127.") or s.ip == "::1":
        return f"this machine only: it listens on {s.ip}; for the room: --ip 0.0.0.0"
    return f"it listens on {s.ip} only"


def banner(s: settings.HubSettings, plan: dict, notes: list[str] = ()) -> str:
    how = "cgroup cpusets" if cores.cpuset_available() else "CPU affinity"
    each = s.memory_mib or limits.memory_each(len(s.attendees), limits.machine_mib())
    pids = s.pids_max or limits.DEFAULT_PIDS
    cores_each = min((len(c) for c in plan.values()), default=1)
    lines = [
        "=" * 72,
        f"  Workshop hub: {s.url}   ({where_from(s)})",
        f"  Attendees ({len(s.attendees)}): each logs in with their roster id and their own "
        "password,",
        f"    from the sheet {s.passwords_path} (print it, hand out one line each;",
        f"    a new one, which ends their open sessions: cd {s.repo} && {sys.executable} -m hub "
        f"password NAME --state-dir {s.state_dir})",
        f"  Instructor: {s.instructor}, password {s.admin_password} (admin; lands in Formgrader)",
        f"  Class view (who is on which step, who is stuck): {s.url}services/class-view/ "
        "(the instructor's log-in)",
    ]
    if s.ssl_cert and s.self_signed:
        lines.append(
            "  HTTPS, self-signed: each browser warns once; attendees check this "
            "fingerprint, then accept it"
        )
        lines.append(f"    (Advanced > Proceed): SHA-256 {tls.fingerprint(Path(s.ssl_cert))}")
    elif not s.ssl_cert:
        lines.append(
            "  Plain HTTP: passwords cross the room's network in clear. For HTTPS: "
            "make hub HUB_ARGS=--https"
        )
    lines += [
        f"  Course: {classroom.course_dir(s)}; after the workshop: "
        f"cd {s.repo} && make grade COURSE={classroom.course_dir(s)}",
        f"  Cores per attendee ({how}): "
        + ", ".join(f"{user} {cores.as_list(c)}" for user, c in plan.items()),
        f"  Limits per attendee: {limits.describe(each, pids, limits.available())}",
    ]
    if cores.oversubscribed(plan):
        lines.append(
            f"  Oversubscribed: {len(plan)} attendees on {len(cores.machine_cores())} "
            "cores, so some share a core and take turns (see INSTALL.md for sizing)"
        )
    if each < limits.needed(cores_each):
        lines.append(
            f"  Too little memory: {notebook_label('run_distributed')}'s run needs about "
            f"{limits.needed(cores_each) / 1024:.1f} GiB per attendee (INSTALL.md, "
            "sizing); it will be killed at the limit"
        )
    lines += [f"  Note: {note}" for note in notes]
    lines += [
        f"  Stop: cd {s.repo} && {sys.executable} -m hub down --state-dir {s.state_dir}",
        f"  Log: {server.log_path(s)} (root only)",
        "=" * 72,
    ]
    return "\n".join(lines)


def guard(s: settings.HubSettings) -> list[str]:
    """What keeps attendees apart beyond their homes; the notes for what could not be done."""
    notes = []
    for why in (isolation.guard_ports(s), isolation.guard_tensorboard(s)):
        if why:
            notes.append(why)
    before, why = isolation.hide_processes()
    if why:
        notes.append(why)
    elif s.proc_options is None and before not in ("2", "invisible"):
        s.proc_options = before  # `down` puts it back
    isolation.write_profile(s)
    classroom.write(s.kernel_startup, kernel_limits.startup_text())
    return notes


def refuse_conflicting_options(args) -> None:
    """Stops `up` on options that contradict each other, or on a first start with no roster."""
    if args.https and args.ssl_cert:
        raise SystemExit(
            "error: --https makes a self-signed certificate; --ssl-cert uses yours: one of them"
        )
    path = Path(args.state_dir) / settings.SETTINGS_NAME
    if not path.is_file() and not args.roster:
        raise SystemExit(
            'error: the first `make hub` needs the roster: make hub HUB_ARGS="--roster roster.csv"'
        )
    if bool(args.ssl_cert) != bool(args.ssl_key):
        raise SystemExit("error: --ssl-cert and --ssl-key go together")


def up(args) -> int:
    memory = limits.parse_size(args.memory_per_attendee) if args.memory_per_attendee else None
    given = dict(
        roster=args.roster and str(Path(args.roster).resolve()),
        port=args.port,
        ip=args.ip,
        instructor=args.instructor,
        ssl_cert=args.ssl_cert,
        ssl_key=args.ssl_key,
        exchange=args.exchange,
        course=args.course,
        memory_mib=memory,
        pids_max=args.pids_per_attendee,
    )
    refuse_conflicting_options(args)
    s = settings.load_or_new(args.state_dir, **given)
    s.venv = sys.prefix
    s.attendees = roster.attendees(s.roster)
    if s.instructor in s.attendees:
        raise SystemExit(f"error: the instructor {s.instructor!r} is also in the roster")
    if server.running(s):
        print("The hub is running already (roster changes need `python -m hub down` first).")
        print(banner(s, s.cores))
        return 0
    moved = server.take_free_ports(s, asked=args.port is not None)
    if moved:
        print(f"==> {moved}")
    subprocess.run(["sh", str(SETUP_PROXY)], check=True)
    s.save()  # makes the state folder (root only)
    if args.https:
        cert, key, made = tls.self_signed(Path(s.state_dir))
        s.ssl_cert, s.ssl_key, s.self_signed = str(cert), str(key), True
        if made:
            print(f"==> self-signed certificate for {', '.join(tls.names())}: {cert}")
    elif args.ssl_cert:
        s.self_signed = False
    for name in s.ensure_passwords():
        print(f"==> a password for {name}")
    s.save()
    auth.write_sheet(s, roster.rows(s.roster))
    shared = [
        Path(sys.executable).resolve(),
        Path(s.repo) / "x",
        s.jupyter_dir / "x",
        Path(s.exchange) / "x",
        s.progress_dir / "x",
    ]
    for folder in [folder for path in shared for folder in reachable(path)]:
        print(
            f"==> so that every account can run the shared environment: chmod o+x {folder} "
            "(`down` closes it again)"
        )
        if folder not in s.made_passable:
            s.made_passable.append(folder)
    s.save()
    for name in [s.instructor, *s.attendees]:
        _, made = accounts.ensure(name, s.group)
        if made:
            print(f"==> account {name} created")
    s.cores = cores.plan(s.attendees, cores.machine_cores())
    s.memory_mib = s.memory_mib or limits.memory_each(len(s.attendees), limits.machine_mib())
    s.pids_max = s.pids_max or limits.DEFAULT_PIDS
    for name in s.attendees:
        limits.make(name, s.memory_mib, s.pids_max)
    notes = guard(s) + progress_drop.make(s) + ([moved] if moved else [])
    s.save()
    for done in classroom.setup(s):
        print(f"==> course: {done.splitlines()[-1] if done else 'ok'}")
    pid = server.start(s)
    print(f"==> JupyterHub started (pid {pid})")
    print(banner(s, s.cores, notes))
    return 0


def _saved(state_dir) -> settings.HubSettings | None:
    """The hub's settings; None, said, when no hub was set up in state_dir."""
    s = settings.saved(state_dir)
    if s is None:
        print(f"no hub was set up in {state_dir}")
    return s


def down(args) -> int:
    s = _saved(args.state_dir)
    if s is None:
        return 0
    print("hub stopped" if server.stop(s) else "the hub was not running")
    removed = []
    for name in [s.instructor, *s.attendees]:
        accounts.stop_processes(name)
        cores.remove_cpuset(name)
        limits.remove(name)
        if args.remove_accounts and accounts.remove(name, s.group):
            removed.append(name)
            print(f"account {name} removed, with its home")
    isolation.unguard_ports(s)
    if isolation.unguard_tensorboard():
        print("TensorBoard's firewall rules removed")
    others = server.other_hubs()
    if others and s.made_passable:
        print(
            f"left passable (o+x), another workshop hub runs (pid {others[0]}): "
            + ", ".join(s.made_passable)
        )
    else:
        for folder in closed_again(s.made_passable):
            print(f"chmod o-x {folder} (as before `make hub`)")
        s.made_passable = []
        s.save()
    if isolation.restore_processes(s.proc_options):
        print(f"/proc: hidepid={s.proc_options} again")
        s.proc_options = None
        s.save()
    isolation.remove_profile()
    if args.remove_accounts:
        accounts.remove_group_if_empty(s.group)
        if progress_drop.remove(s):
            print(f"the class view's records removed ({s.progress_dir})")
        for line in left_behind(s, removed):
            print(line)
    return 0


def left_behind(s: settings.HubSettings, removed: list[str]) -> list[str]:
    """After --remove-accounts: the password sheet goes (its accounts are gone); what stays is
    said, with the command that removes it."""
    lines = []
    if removed and s.passwords_path.is_file():
        s.passwords_path.unlink()
        s.passwords = {}
        s.save()
        lines.append(f"password sheet {s.passwords_path} removed")
    lines.append(
        f"left: {s.state_dir} (root only: settings, the hub's database and log, with "
        f"every attendee's name and requests) and {s.jupyter_dir}; when done: "
        f"rm -rf {s.state_dir} {s.jupyter_dir}"
    )
    exchange = Path(s.exchange)
    if exchange.is_dir():
        orphans = sum(1 for p in exchange.rglob("*") if _owner_gone(p))
        lines.append(
            f"left: the exchange {exchange} (submissions and feedback; {orphans} files "
            f"owned by removed accounts); once graded: rm -rf {exchange}"
        )
    return lines


def _owner_gone(path: Path) -> bool:
    import pwd

    try:
        pwd.getpwuid(path.lstat().st_uid)
        return False
    except (KeyError, OSError):
        return True


def password(args) -> int:
    s = _saved(args.state_dir)
    if s is None:
        return 1
    if args.name not in s.attendees:
        print(
            f"error: {args.name!r} is not in the roster ({', '.join(s.attendees)})", file=sys.stderr
        )
        return 1
    s.passwords[args.name] = settings.new_password()
    s.save()
    auth.write_sheet(s, roster.rows(s.roster))
    print(
        f"{args.name}: {s.passwords[args.name]}   (the next log-in needs it; the sheet "
        f"{s.passwords_path} has it too)"
    )
    print(f"{args.name}: {server.end_sessions(s, args.name)}")
    return 0


def status(args) -> int:
    s = settings.saved(args.state_dir)
    if s and server.running(s):
        print(banner(s, s.cores))
        return 0
    print("the hub is not running")
    return 3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hub", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        default=str(settings.DEFAULT_STATE_DIR),
        help=f"settings, passwords, database, log (default {settings.DEFAULT_STATE_DIR})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser(
        "up", parents=[common], help="set up what is missing and start the hub"
    )
    start.add_argument("--roster", help="CSV: id,first_name,last_name,email (one account per id)")
    start.add_argument(
        "--port",
        type=int,
        help="the hub's port (default 8000, or the next free ones; the hub uses it and the 3 after it)",
    )
    start.add_argument("--ip", help="address to listen on (default 0.0.0.0)")
    start.add_argument("--ssl-cert", help="TLS certificate (PEM); with --ssl-key: https")
    start.add_argument("--ssl-key", help="TLS key (PEM)")
    start.add_argument(
        "--https",
        action="store_true",
        help="https with a self-signed certificate made once in the state folder",
    )
    start.add_argument(
        "--memory-per-attendee",
        metavar="SIZE",
        help="each attendee's memory limit, e.g. 3G (default: the machine's "
        "memory less 1 GiB, shared equally)",
    )
    start.add_argument(
        "--pids-per-attendee",
        type=int,
        metavar="N",
        help=f"each attendee's processes and threads (default {limits.DEFAULT_PIDS})",
    )
    start.add_argument("--instructor", help="the instructor's account (default instructor)")
    start.add_argument("--exchange", help="nbgrader's exchange (default /srv/nbgrader/exchange)")
    start.add_argument("--course", help="the course folder (default ~INSTRUCTOR/course)")
    stop = commands.add_parser(
        "down", parents=[common], help="stop the hub and the attendees' servers"
    )
    stop.add_argument(
        "--remove-accounts",
        action="store_true",
        help="also delete the accounts the hub made, with their homes (the "
        "instructor's course too: grade and copy grades.csv first)",
    )
    commands.add_parser(
        "status", parents=[common], help="print the URL and the log-in, or that it is stopped"
    )
    reset = commands.add_parser(
        "password", parents=[common], help="a new password for one attendee (the sheet too)"
    )
    reset.add_argument("name", help="the attendee's roster id")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("error: the hub needs root (accounts, CPU sets, the proxy): sudo make hub")
    try:
        return {"up": up, "down": down, "status": status, "password": password}[args.command](args)
    except (roster.RosterError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
