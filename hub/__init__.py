"""A JupyterHub workshop server for a class: `make hub` (`python -m hub up`, as root).

One Unix account per attendee of the roster (and the instructor); each attendee logs in with
the workshop's shared password and lands in JupyterLab in their own copy of the workbook, on
their own CPU cores, with nbgrader's Assignments list; the instructor gets the formgrader.

    settings          the hub's settings (port, TLS, roster, folders), kept in one JSON file
    roster            the attendees of the roster CSV (the one `python -m instructor add-students` reads)
    accounts          their Unix accounts: created, private homes, removed
    cores             each attendee's CPU set: cgroup v1 cpuset where mounted, affinity otherwise
    workbook_copy     an attendee's own copy of the workbook, made on first login, never overwritten
    classroom         nbgrader the hub way: the shared exchange, per-role Jupyter settings, the course
    spawner           the spawner: the copy, the CPU set and the environment of each server
    jupyterhub_config JupyterHub's configuration, read from the settings file
    server            start, find and stop the hub process; the banner
    __main__          the command line: up, down, status
    measure           sizing: peak memory and CPU time of a command's process tree
    setup_proxy.sh    configurable-http-proxy from npm (Node and npm from Debian when missing)
    k8s/              the same for Zero to JupyterHub on Kubernetes (untested)

Imports: workbook (facts, paths); instructor only as a command (`python -m instructor`).
"""
