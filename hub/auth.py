"""The hub's log-in: one password per person, never shared (issue 29).

`make hub` gives each attendee of the roster a password of their own (hub/settings.py: three
groups of four characters a printed sheet cannot blur) and writes the sheet to hand out,
`passwords.csv` in the root-only state folder; the instructor has their own, as admin. A
password opens its owner's account and no other: the name typed is normalised (JupyterHub
lower-cases and strips it, so `Alice` and `alice ` are alice) before it is looked up, and it is
compared with that one account's password. `python -m hub password NAME` gives one attendee a
new password; the next log-in reads it (the settings file is read at every log-in).

Why not a sign-up or first-log-in authenticator: a password set at first log-in belongs to
whoever logs in first under that name, and a sign-up wants the instructor to approve every
attendee; a sheet of passwords is one step for a room (hand out the slips) and lets no one in
as someone else.
"""

from __future__ import annotations

import csv
import hmac
import os
from pathlib import Path

from jupyterhub.auth import Authenticator
from traitlets import Unicode

from hub import settings as hub_settings


class RosterAuthenticator(Authenticator):
    settings_file = Unicode(help="the hub's settings (hub/settings.py)", config=True)

    def password_of(self, username: str) -> str | None:
        s = hub_settings.load(self.settings_file)
        if username == s.instructor:
            return s.admin_password
        return s.passwords.get(username) if username in s.attendees else None

    async def authenticate(self, handler, data):
        username = self.normalize_username(data.get("username") or "")
        expected = self.password_of(username)
        given = data.get("password") or ""
        if expected and hmac.compare_digest(expected.encode(), given.encode()):
            return username
        self.log.warning("failed log-in for %r", username)
        return None

    def delete_user(self, user):
        """The hub forgets a user whose password was reset (hub.server.end_sessions), which
        ends their sessions; the roster still allows them (JupyterHub's own hook would not)."""


def write_sheet(s: hub_settings.HubSettings, roster_rows: list[dict]) -> Path:
    """The sheet to print and hand out: one line per attendee (root only)."""
    path = s.passwords_path
    by_id = {row.get("id", "").strip(): row for row in roster_rows}
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", newline="") as out:
        table = csv.writer(out)
        table.writerow(["id", "first_name", "last_name", "password", "url"])
        for name in s.attendees:
            row = by_id.get(name, {})
            table.writerow(
                [
                    name,
                    row.get("first_name", ""),
                    row.get("last_name", ""),
                    s.passwords[name],
                    s.url,
                ]
            )
    os.chmod(path, 0o600)
    return path
