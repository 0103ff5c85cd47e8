"""The workshop hub's command line (root).

    python -m hub up --roster roster.csv [--port 8000] [--ssl-cert F --ssl-key F]
                     [--instructor NAME] [--state-dir DIR]        what `make hub` runs
    python -m hub status [--state-dir DIR]                        the URL, or that it is stopped
    python -m hub down [--remove-accounts] [--state-dir DIR]      stop it (and delete the accounts)

`up` is idempotent: it installs what is missing, makes what is missing (accounts, CPU sets, the
exchange, the course) and starts JupyterHub unless it runs; the passwords stay the same.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path

from hub import accounts, classroom, cores, roster, server, settings

SETUP_PROXY = Path(__file__).with_name("setup_proxy.sh")


def reachable(path: Path) -> list[str]:
    """Let other accounts pass through the folders above `path` (o+x, not o+r: they cannot
    list them), so that attendees can run the shared environment. What was changed."""
    changed = []
    for folder in reversed(Path(path).resolve().parents):
        if not folder.is_dir():
            break  # made later, by the hub (with the mode it needs)
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
            changed.append(f"chmod o+x {folder}")
    return changed


def banner(s: settings.HubSettings, plan: dict) -> str:
    how = "cgroup cpusets" if cores.cpuset_available() else "CPU affinity"
    lines = [
        "=" * 72,
        f"  Workshop hub: {s.url}   (from other machines: this host's name or address)",
        f"  Attendees ({len(s.attendees)}): log in with their roster id and the password "
        f"{s.user_password}",
        f"  Instructor: {s.instructor}, password {s.admin_password} (admin; Nbgrader menu: "
        "Formgrader)",
        f"  Course: {classroom.course_dir(s)}; after the workshop: "
        f"make grade COURSE={classroom.course_dir(s)}",
        f"  Cores per attendee ({how}): "
        + ", ".join(f"{user} {cores.as_list(c)}" for user, c in plan.items()),
    ]
    if cores.oversubscribed(plan):
        lines.append(f"  Oversubscribed: {len(plan)} attendees on {len(cores.machine_cores())} "
                     "cores, so some share a core and take turns (see INSTALL.md for sizing)")
    lines += [f"  Stop: cd {s.repo} && {sys.executable} -m hub down --state-dir {s.state_dir}",
              f"  Log: {server.log_path(s)}", "=" * 72]
    return "\n".join(lines)


def up(args) -> int:
    given = dict(roster=args.roster and str(Path(args.roster).resolve()), port=args.port,
                 ip=args.ip, instructor=args.instructor, ssl_cert=args.ssl_cert,
                 ssl_key=args.ssl_key, exchange=args.exchange, course=args.course)
    path = Path(args.state_dir) / settings.SETTINGS_NAME
    if not path.is_file() and not args.roster:
        raise SystemExit("error: the first `make hub` needs the roster: "
                         "make hub HUB_ARGS=\"--roster roster.csv\"")
    if bool(args.ssl_cert) != bool(args.ssl_key):
        raise SystemExit("error: --ssl-cert and --ssl-key go together")
    s = settings.load_or_new(args.state_dir, **given)
    s.venv = sys.prefix
    s.attendees = roster.attendees(s.roster)
    if s.instructor in s.attendees:
        raise SystemExit(f"error: the instructor {s.instructor!r} is also in the roster")
    if server.running(s):
        print(f"The hub is running already (roster changes need `python -m hub down` first).")
        print(banner(s, s.cores))
        return 0
    subprocess.run(["sh", str(SETUP_PROXY)], check=True)
    s.save()  # makes the state folder; the role settings in it are read by every server
    shared = [Path(sys.executable).resolve(), Path(s.repo) / "x", Path(s.state_dir) / "x",
              Path(s.exchange) / "x"]
    for change in [change for path in shared for change in reachable(path)]:
        print(f"==> so that every account can run the shared environment: {change}")
    for name in [s.instructor, *s.attendees]:
        _, made = accounts.ensure(name, s.group)
        if made:
            print(f"==> account {name} created")
    s.cores = cores.plan(s.attendees, cores.machine_cores())
    s.save()
    for done in classroom.setup(s):
        print(f"==> course: {done.splitlines()[-1] if done else 'ok'}")
    pid = server.start(s)
    print(f"==> JupyterHub started (pid {pid})")
    print(banner(s, s.cores))
    return 0


def down(args) -> int:
    path = Path(args.state_dir) / settings.SETTINGS_NAME
    if not path.is_file():
        print(f"no hub was set up in {args.state_dir}")
        return 0
    s = settings.load(path)
    print("hub stopped" if server.stop(s) else "the hub was not running")
    for name in [s.instructor, *s.attendees]:
        accounts.stop_processes(name)
        cores.remove_cpuset(name)
        if args.remove_accounts and accounts.remove(name, s.group):
            print(f"account {name} removed, with its home")
    if args.remove_accounts:
        accounts.remove_group_if_empty(s.group)
    return 0


def status(args) -> int:
    path = Path(args.state_dir) / settings.SETTINGS_NAME
    s = settings.load(path) if path.is_file() else None
    if s and server.running(s):
        print(banner(s, s.cores))
        return 0
    print("the hub is not running")
    return 3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hub", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=str(settings.DEFAULT_STATE_DIR),
                        help=f"settings, passwords, database, log (default "
                             f"{settings.DEFAULT_STATE_DIR})")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", parents=[common],
                                help="set up what is missing and start the hub")
    start.add_argument("--roster", help="CSV: id,first_name,last_name,email (one account per id)")
    start.add_argument("--port", type=int, help="the hub's port (default 8000)")
    start.add_argument("--ip", help="address to listen on (default 0.0.0.0)")
    start.add_argument("--ssl-cert", help="TLS certificate (PEM); with --ssl-key: https")
    start.add_argument("--ssl-key", help="TLS key (PEM)")
    start.add_argument("--instructor", help="the instructor's account (default instructor)")
    start.add_argument("--exchange", help="nbgrader's exchange (default /srv/nbgrader/exchange)")
    start.add_argument("--course", help="the course folder (default ~INSTRUCTOR/course)")
    stop = commands.add_parser("down", parents=[common],
                               help="stop the hub and the attendees' servers")
    stop.add_argument("--remove-accounts", action="store_true",
                      help="also delete the accounts the hub made, with their homes (the "
                           "instructor's course too: grade and copy grades.csv first)")
    commands.add_parser("status", parents=[common],
                        help="print the URL and the log-in, or that it is stopped")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("error: the hub needs root (accounts, CPU sets, the proxy): sudo make hub")
    try:
        return {"up": up, "down": down, "status": status}[args.command](args)
    except (roster.RosterError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
