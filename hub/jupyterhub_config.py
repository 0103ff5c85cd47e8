# JupyterHub's configuration for the workshop hub (`make hub`); every value comes from the
# settings file that `python -m hub up` writes (hub/settings.py), named by WORKBOOK_HUB_SETTINGS.
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the workbook's packages

from hub import settings as hub_settings  # noqa: E402
from workbook.facts import LAB_ARGS, notebook  # noqa: E402

c = get_config()  # noqa: F821 (JupyterHub provides it)
settings_file = os.environ[hub_settings.SETTINGS_VARIABLE]
s = hub_settings.load(settings_file)
state = Path(s.state_dir)

c.JupyterHub.ip = s.ip
c.JupyterHub.port = s.port
if s.ssl_cert:
    c.JupyterHub.ssl_cert = s.ssl_cert
    c.JupyterHub.ssl_key = s.ssl_key
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = s.hub_api_port
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every attendee's server

# A workshop's log-in: each attendee of the roster with their own password (the sheet that
# `make hub` writes), the instructor, admin, with theirs (hub/auth.py).
c.JupyterHub.authenticator_class = "hub.auth.RosterAuthenticator"
c.RosterAuthenticator.settings_file = settings_file
c.Authenticator.allowed_users = set(s.attendees)
c.Authenticator.admin_users = {s.instructor}

c.JupyterHub.spawner_class = "hub.spawner.WorkshopSpawner"
c.WorkshopSpawner.settings_file = settings_file
c.Spawner.cmd = [str(Path(s.venv) / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = f"/lab/tree/notebooks/{notebook('welcome').file_name}"
c.Spawner.args = list(LAB_ARGS)  # as `make lab` starts it
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# The test suite's process markers (tests/processes.py) reach the servers, so that a test
# finds and stops everything it started; unset outside the tests.
c.Spawner.env_keep = ["LANG", "LC_ALL", "WORKBOOK_TEST_ID", "WORKBOOK_TEST_SESSION"]

# The login page says which name to type (the hub's accounts are the roster's ids).
c.JupyterHub.template_vars = {
    "announcement_login": (
        "Your user name is your roster id, as on the slip you were given, with your own password."
    )
}

# The instructor's class view (hub/class_view_service.py): who is on which step, who is stuck. It
# runs as the instructor's account, which may read the attendees' check records and nothing
# else of theirs; only the instructor (admin) gets past its log-in. And the token with which
# `python -m hub password NAME` ends that attendee's sessions.
c.JupyterHub.services = [
    {
        "name": "class-view",
        "url": f"http://127.0.0.1:{s.class_view_port}",
        "command": [
            str(Path(s.venv) / "bin" / "python"),
            "-m",
            "hub.class_view_service",
            "--progress-dir",
            str(s.progress_dir),
            "--instructor",
            s.instructor,
            "--attendees",
            ",".join(s.attendees),
        ],
        "user": s.instructor,
        "cwd": s.repo,
        "environment": {"PYTHONPATH": s.repo},
        "oauth_no_confirm": True,
    },
    {"name": "workbook-cli", "api_token": s.api_token, "display": False},
]
c.JupyterHub.load_roles = [
    {
        "name": "workbook-cli",
        "scopes": ["admin:users", "admin:servers"],
        "services": ["workbook-cli"],
    },
]
