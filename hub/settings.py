"""The hub's settings, in one JSON file that `make hub` writes and jupyterhub_config.py reads."""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbook.paths import REPO

DEFAULT_STATE_DIR = Path("/srv/horovod-workbook-hub")
SETTINGS_NAME = "hub.json"
# jupyterhub_config.py finds the settings file through this variable (set by `python -m hub`).
SETTINGS_VARIABLE = "WORKBOOK_HUB_SETTINGS"
# SharedPasswordAuthenticator's minimum lengths (JupyterHub 5.3+): users 8, admins 32.
USER_PASSWORD_BYTES, ADMIN_PASSWORD_BYTES = 9, 27  # token_urlsafe: 12 and 36 characters


@dataclass
class HubSettings:
    state_dir: str                      # root-only: settings, passwords, database, log, pid
    roster: str                         # CSV: id,first_name,last_name,email
    instructor: str = "instructor"
    ip: str = "0.0.0.0"
    port: int = 8000
    ssl_cert: str | None = None
    ssl_key: str | None = None
    venv: str = sys.prefix              # the shared environment (read-only for attendees)
    repo: str = str(REPO)               # the workbook the copies are made from
    exchange: str = "/srv/nbgrader/exchange"
    course: str | None = None           # the instructor's course (default: ~instructor/course)
    group: str = "workbook-attendees"
    user_password: str = field(default_factory=lambda: secrets.token_urlsafe(USER_PASSWORD_BYTES))
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(ADMIN_PASSWORD_BYTES))
    attendees: list = field(default_factory=list)   # from the roster, in its order
    cores: dict = field(default_factory=dict)       # user -> list of CPU ids

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / SETTINGS_NAME

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_cert else "http"
        host = "127.0.0.1" if self.ip in ("0.0.0.0", "", "::") else self.ip
        return f"{scheme}://{host}:{self.port}/"

    def save(self) -> Path:
        Path(self.state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.state_dir, 0o700)  # the passwords are in it
        self.path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.chmod(self.path, 0o600)
        return self.path


def load(path) -> HubSettings:
    return HubSettings(**json.loads(Path(path).read_text()))


def load_or_new(state_dir, **given) -> HubSettings:
    """The settings saved before (the passwords stay the same), updated with what is given."""
    path = Path(state_dir) / SETTINGS_NAME
    settings = load(path) if path.is_file() else HubSettings(state_dir=str(state_dir),
                                                              roster=given["roster"])
    for name, value in given.items():
        if value is not None:
            setattr(settings, name, value)
    settings.state_dir = str(state_dir)
    return settings
