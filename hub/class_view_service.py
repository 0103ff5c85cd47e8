"""The class view as a JupyterHub service: /services/class-view/ on the hub, for the instructor.

    python -m hub.class_view_service --progress-dir D --instructor NAME --attendees a,b,c

JupyterHub starts it (hub/jupyterhub_config.py) as the instructor's Unix account, which may read
the attendees' check records (hub/progress_drop.py) and nothing else of theirs. The log-in is
the hub's (OAuth): only a user with access to this service (an admin: the instructor) gets
past it, and the page checks the name too. The page updates itself: it fetches its table again
every POLL_S seconds.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import ioloop, web

from hub import class_view, progress_drop
from workbook import class_progress

NAME = "class-view"
POLL_S = 5

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Class view</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.4em 1em; text-align: left; }}
tr.stuck td:first-child {{ border-left: 4px solid #cf222e; }}
#headline {{ font-size: 1.2em; }}
.small {{ color: #666; font-size: 0.9em; }}
</style></head>
<body>
<h1>Class view</h1>
<p class="small">Each attendee's step as their last "check my step" cell said it; updated every
{poll} s (last: <span id="updated">{updated}</span>). Nothing else of theirs is read.</p>
<div id="standings">{table}</div>
<script>
async function update() {{
  try {{
    // The hub's services want their XSRF token on a script's requests.
    const reply = await fetch("table", {{credentials: "same-origin",
                                         headers: {{"X-XSRFToken": "{xsrf}"}}}});
    if (reply.ok) {{
      document.getElementById("standings").innerHTML = await reply.text();
      document.getElementById("updated").textContent = new Date().toLocaleTimeString();
    }}
  }} catch (error) {{}}
}}
setInterval(update, {poll_ms});
</script>
</body></html>
"""


def records_by(folder: Path, attendees: list[str]) -> dict:
    """attendee -> their records, or why they could not be read."""
    found = {}
    for name in attendees:
        try:
            found[name] = class_progress.read(progress_drop.path_of(folder, name))
        except OSError as error:
            found[name] = error.strerror or type(error).__name__
    return found


class ClassViewHandler(HubOAuthenticated, web.RequestHandler):
    def initialize(self, folder: Path, attendees: list[str], instructor: str):
        self.folder, self.attendees, self.instructor = folder, attendees, instructor

    def table(self) -> str:
        now = time.time()
        return class_view.table_html(
            class_view.class_standings(records_by(self.folder, self.attendees), now), now
        )

    def allowed(self) -> None:
        user = self.get_current_user()
        if user.get("kind", "user") != "user" or user.get("name") != self.instructor:
            raise web.HTTPError(403, "the class view is the instructor's")
        self.set_header("Cache-Control", "no-store")


class PageHandler(ClassViewHandler):
    @web.authenticated
    def get(self):
        self.allowed()
        xsrf = self.xsrf_token
        self.write(
            PAGE.format(
                poll=POLL_S,
                poll_ms=POLL_S * 1000,
                table=self.table(),
                updated=time.strftime("%H:%M:%S"),
                xsrf=xsrf.decode() if isinstance(xsrf, bytes) else xsrf,
            )
        )


class TableHandler(ClassViewHandler):
    @web.authenticated
    def get(self):
        self.allowed()
        self.write(self.table())


def make_app(prefix: str, folder: Path, attendees: list[str], instructor: str) -> web.Application:
    given = dict(folder=folder, attendees=attendees, instructor=instructor)
    return web.Application(
        [
            (prefix, PageHandler, given),
            (url_path_join(prefix, "table"), TableHandler, given),
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
        ],
        cookie_secret=os.urandom(32),
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hub.class_view_service", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--progress-dir", required=True)
    parser.add_argument("--instructor", required=True)
    parser.add_argument("--attendees", required=True, help="comma-separated roster ids")
    args = parser.parse_args(argv)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{NAME}/")
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    app = make_app(
        prefix,
        Path(args.progress_dir),
        [a for a in args.attendees.split(",") if a],
        args.instructor,
    )
    app.listen(url.port, url.hostname)
    ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
