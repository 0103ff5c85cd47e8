"""A JupyterHub workshop server for a class: `make hub` (`python -m hub up`, as root).

One Unix account per attendee of the roster (and the instructor); each attendee logs in with
their own password (a sheet to hand out) and lands in JupyterLab in their own copy of the
workbook, on their own CPU cores, within their own memory and process limits, with nbgrader's
Assignments list; the instructor gets the formgrader. No attendee can log in as, slow down to a
halt, or read another (issue 29).

    settings          the hub's settings (port, TLS, roster, passwords, folders), in one JSON file
    roster            the attendees of the roster CSV (the one `python -m instructor add-students` reads)
    auth              the log-in: each attendee's own password; the sheet to hand out
    accounts          their Unix accounts: created, private homes, removed
    cores             each attendee's CPU set: cgroup v1 cpuset where mounted, affinity otherwise
    limits            each attendee's memory and process limits: cgroup v1 memory and pids
    isolation         each account's ports (iptables: only the owner connects), hidepid, the
                      terminal's PATH
    port_guard        ... and only the owner listens there (a BPF program on bind per cgroup)
    kernel_limits     in an attendee's kernel: the memory or process limit named where it hits
    progress_drop     each attendee's file for their check cells' verdicts (for the class view)
    class_view        who is on which step, who has been stuck longest; the view's table
    class_view_service  the class view as a JupyterHub service, for the instructor only
    tls               `--https`: a self-signed certificate and its fingerprint
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
