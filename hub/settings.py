"""The hub's settings, in one JSON file that `make hub` writes and jupyterhub_config.py reads."""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from workbook.paths import REPO

DEFAULT_STATE_DIR = Path("/srv/horovod-workbook-hub")
SETTINGS_NAME = "hub.json"
# jupyterhub_config.py finds the settings file through this variable (set by `python -m hub`).
SETTINGS_VARIABLE = "WORKBOOK_HUB_SETTINGS"
ADMIN_PASSWORD_BYTES = 27  # token_urlsafe: 36 characters
# Each attendee's password: 3 groups of 4 from 31 characters that cannot be mistaken for one
# another on a printed sheet (no 0/o, 1/l/i), about 59 bits: typed once, by hand.
PASSWORD_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
PASSWORDS_NAME = "passwords.csv"  # the sheet to print and hand out (root-only)


def new_password() -> str:
    return "-".join("".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(4)) for _ in range(3))


# The hub's ports from HubSettings.port on (one home: hub/jupyterhub_config.py and hub/server.py
# read them here): the proxy's, at the attendees' address; then on 127.0.0.1 the hub's REST API,
# the proxy's API and the class view's.
HUB_PORTS = 4


@dataclass
class HubSettings:
    state_dir: str  # root-only: settings, passwords, database, log, pid
    roster: str  # CSV: id,first_name,last_name,email
    instructor: str = "instructor"
    ip: str = "0.0.0.0"
    port: int = 8000
    ssl_cert: str | None = None
    ssl_key: str | None = None
    self_signed: bool = False  # ssl_cert/ssl_key made by `make hub --https`
    venv: str = sys.prefix  # the shared environment (read-only for attendees)
    repo: str = str(REPO)  # the workbook the copies are made from
    exchange: str = "/srv/nbgrader/exchange"
    course: str | None = None  # the instructor's course (default: ~instructor/course)
    group: str = "workbook-attendees"
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(ADMIN_PASSWORD_BYTES))
    passwords: dict = field(default_factory=dict)  # attendee -> their own password
    attendees: list = field(default_factory=list)  # from the roster, in its order
    cores: dict = field(default_factory=dict)  # user -> list of CPU ids
    memory_mib: int | None = None  # each attendee's memory limit (None: from the machine)
    pids_max: int | None = None  # each attendee's process limit (None: the default)
    proc_options: str | None = None  # /proc's hidepid before `make hub` changed it
    # The folders `make hub` made passable (o+x) for the shared environment: `down` closes them.
    made_passable: list = field(default_factory=list)
    # The hub's API token of `python -m hub password` (ends a reset attendee's sessions).
    api_token: str = field(default_factory=lambda: secrets.token_hex(32))

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / SETTINGS_NAME

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_cert else "http"
        host = "127.0.0.1" if self.ip in ("0.0.0.0", "", "::") else self.ip
        return f"{scheme}://{host}:{self.port}/"

    @property
    def jupyter_dir(self) -> Path:
        """The role settings every server reads: beside the state folder, which stays root-only."""
        state = Path(self.state_dir)
        return state.with_name(state.name + "-jupyter")

    @property
    def kernel_startup(self) -> Path:
        """The attendees' kernels' PYTHONSTARTUP (hub/kernel_limits.py), with the role settings."""
        return self.jupyter_dir / "kernel_startup.py"

    @property
    def progress_dir(self) -> Path:
        """Each attendee's check records for the class view (hub/progress_drop.py), beside the
        state folder."""
        state = Path(self.state_dir)
        return state.with_name(state.name + "-progress")

    def ports_from(self, port: int) -> list[tuple[int, str]]:
        """The hub's ports when its first is `port`, each with the address it listens at."""
        return [
            (port, self.ip or "0.0.0.0"),
            *((port + n, "127.0.0.1") for n in range(1, HUB_PORTS)),
        ]

    @property
    def hub_api_port(self) -> int:
        return self.port + 1

    @property
    def proxy_api_port(self) -> int:
        return self.port + 2

    @property
    def class_view_port(self) -> int:
        return self.port + 3

    @property
    def passwords_path(self) -> Path:
        return Path(self.state_dir) / PASSWORDS_NAME

    def ensure_passwords(self) -> list[str]:
        """A password for every attendee who has none (kept across `make hub`); who got one."""
        new = [name for name in self.attendees if not self.passwords.get(name)]
        for name in new:
            self.passwords[name] = new_password()
        return new

    def save(self) -> Path:
        Path(self.state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.state_dir, 0o700)  # the passwords are in it
        self.path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.chmod(self.path, 0o600)
        return self.path


def load(path) -> HubSettings:
    known = {f.name for f in fields(HubSettings)}  # an older file's other keys are dropped
    return HubSettings(
        **{k: v for k, v in json.loads(Path(path).read_text()).items() if k in known}
    )


def saved(state_dir) -> HubSettings | None:
    """The settings saved in state_dir, or None when no hub was set up there."""
    path = Path(state_dir) / SETTINGS_NAME
    return load(path) if path.is_file() else None


def load_or_new(state_dir, **given) -> HubSettings:
    """The settings saved before (the passwords stay the same), updated with what is given."""
    settings = saved(state_dir) or HubSettings(state_dir=str(state_dir), roster=given["roster"])
    for name, value in given.items():
        if value is not None:
            setattr(settings, name, value)
    settings.state_dir = str(state_dir)
    return settings
