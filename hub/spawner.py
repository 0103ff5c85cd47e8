"""The hub's spawner: LocalProcessSpawner (one server per Unix account, started as that
account), plus, for each server: the attendee's copy of the workbook (made on first login),
their CPU set (hub.cores) and their memory and process limits (hub.limits), joined before the
server starts, so everything it runs is inside them, and the cgroup that keeps the others'
ports from them (hub.port_guard); and their environment: the shared environment's tools first,
their copy first on PYTHONPATH, their own TensorBoard port (reached through the hub by
jupyter-server-proxy), the role's Jupyter settings (hub.classroom), and an attendee's file for
their check cells' verdicts (hub.progress_drop, read by the instructor's class view).
"""

from __future__ import annotations

import os
import pwd
from functools import cached_property
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

from hub import (
    classroom,
    cores,
    isolation,
    limits,
    port_guard,
    progress_drop,
    settings,
    workbook_copy,
)
from workbook.class_progress import PROGRESS_VARIABLE


class WorkshopSpawner(LocalProcessSpawner):
    settings_file = Unicode(help="the hub's settings (hub/settings.py)", config=True)

    @cached_property
    def hub_settings(self) -> settings.HubSettings:
        return settings.load(self.settings_file)

    @property
    def role(self) -> str:
        return classroom.role_of(self.hub_settings, self.user.name)

    def user_cores(self) -> list[int] | None:
        """The attendee's cores; None for the instructor (the whole machine)."""
        return self.hub_settings.cores.get(self.user.name)

    def tensorboard_port(self) -> int:
        """Only this account may connect to it (hub.isolation); make lab's own keeps 6006."""
        return isolation.tensorboard_port(self.hub_settings, self.user.name)

    def make_preexec_fn(self, name):
        become_user = super().make_preexec_fn(name)
        user_cores = self.user_cores()
        folder = self.server_root()

        def preexec():
            if user_cores:  # still root here: join the cgroups, then become the user
                cores.confine(os.getpid(), name, user_cores)
                limits.join(os.getpid(), name)
            port_guard.join(os.getpid(), name)  # the others' ports: refused
            become_user()
            # In their folder: nbgrader fetches into the working folder (for an attendee, next
            # to notebooks/, so that the assignment's notebooks find ../data).
            os.chdir(folder)

        return preexec

    def get_env(self):
        env = super().get_env()
        venv_bin = Path(self.hub_settings.venv) / "bin"
        home = Path(pwd.getpwnam(self.user.name).pw_dir)
        env.update(
            PATH=f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            PYTHONPATH=str(workbook_copy.copy_dir(home)),
            JUPYTER_CONFIG_PATH=str(classroom.config_dir(self.hub_settings, self.role)),
            WORKBOOK_TENSORBOARD_PORT=str(self.tensorboard_port()),
        )
        if self.role == "student":
            # Their check cells' verdicts, for the class view; their limits named where they hit.
            env[PROGRESS_VARIABLE] = str(
                progress_drop.path_of(self.hub_settings.progress_dir, self.user.name)
            )
            env["PYTHONSTARTUP"] = str(self.hub_settings.kernel_startup)
        return env

    async def start(self):
        entry = pwd.getpwnam(self.user.name)
        copy, made = workbook_copy.make(
            Path(self.hub_settings.repo), Path(entry.pw_dir), entry.pw_uid, entry.pw_gid
        )
        self.log.info(
            "%s's workbook: %s (%s)", self.user.name, copy, "made now" if made else "kept as it is"
        )
        self.notebook_dir = str(self.server_root())
        s = self.hub_settings
        if self.user_cores():  # an attendee: their memory and process limits, as `make hub` set
            limits.make(self.user.name, s.memory_mib, s.pids_max or limits.DEFAULT_PIDS)
        try:  # as `make hub` made it (a cgroup removed since is made again)
            port_guard.guard(
                self.user.name, isolation.port_block(s), isolation.port_range(s, self.user.name)
            )
        except OSError as error:
            self.log.warning("%s's ports are not kept to them: %s", self.user.name, error)
        if self.role == "instructor":
            self.default_url = "/formgrader"
        return await super().start()

    def server_root(self) -> Path:
        """The attendee's copy; the instructor's home, which holds their copy and the course
        (nbgrader's formgrader needs the course inside the server's folder)."""
        home = Path(pwd.getpwnam(self.user.name).pw_dir)
        return home if self.role == "instructor" else workbook_copy.copy_dir(home)
