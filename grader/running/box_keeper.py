"""The first process in a sandboxed run's box (grader/running/sandbox.py): it runs the run's
command, keeps its output bounded and lets nothing outlive it.

    python -I -S box_keeper.py LIMIT COMMAND...

- Output: the command's stdout and stderr are copied to the keeper's own, LIMIT bytes in all;
  the rest is read and counted, never held (the grader's memory does not grow with a student's
  output), and one line at the end says how much was dropped (OUTPUT_CUT).
- Processes: the keeper is a child subreaper (prctl), so a process the script detaches (a
  double fork, a daemon) becomes its child instead of escaping to the box's init, and is killed
  at once: nothing holds a worker's pipe open after the worker ends, so horovodrun ends. When
  the command ends, whatever is left is killed and the keeper exits with the command's status
  (128 + N for a signal N), which ends the box's PID namespace.

Standard library only, no site (-S): it starts in milliseconds and imports nothing the box
could shadow.
"""

import ctypes
import os
import select
import signal
import sys
import time

OUTPUT_CUT = "[sandbox] output over the limit was dropped"  # the class report looks for it
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.2
DRAIN_S = 2.0  # after the command ended, how long its pipes may still bring output


def children(pid: int) -> list:
    """The pids whose parent is `pid` (this PID namespace's /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(name))
    return found


def kill_detached(command: int) -> None:
    """Kills every child of the keeper but the command (they were detached: orphans)."""
    for pid in children(os.getpid()):
        if pid != command:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def reap(command: int, status: list) -> None:
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == command:
            status.append(os.waitstatus_to_exitcode(code))


def main() -> int:
    limit, argv = int(sys.argv[1]), sys.argv[2:]
    try:
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the box's init still ends them all when the keeper ends
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    command = os.fork()
    if command == 0:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            os.write(2, f"{argv[0]}: {error}\n".encode())
        os._exit(127)
    os.close(out_w)
    os.close(err_w)
    targets = {out_r: 1, err_r: 2}
    left, dropped, status, ended = limit, 0, [], None
    while targets:
        ready, _, _ = select.select(list(targets), [], [], POLL_S)
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                del targets[fd]
                os.close(fd)
                continue
            kept = data[:left]
            left -= len(kept)
            dropped += len(data) - len(kept)
            if kept:
                os.write(targets[fd], kept)
        kill_detached(command)
        reap(command, status)
        if status and ended is None:
            ended = time.monotonic()
        if ended is not None and time.monotonic() - ended > DRAIN_S:
            break
    while not status:
        kill_detached(command)
        reap(command, status)
        time.sleep(0.05) if not status else None
    kill_detached(command)
    if dropped:
        os.write(1, f"\n{OUTPUT_CUT}: {dropped} bytes after the first {limit}\n".encode())
    code = status[0]
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
