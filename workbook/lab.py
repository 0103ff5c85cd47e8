"""Start (or find) the workbook's JupyterLab and TensorBoard and print where they are.

    python -m workbook.lab [--port 8888] [--ip 127.0.0.1]     (what `make lab` runs)

If a JupyterLab for this repository is already running, its URL is printed and nothing new is
started, so running `make lab` twice is harmless. A port another program holds is no error:
TensorBoard and JupyterLab take the next free one, and the banner says which and who held it.

In a git checkout it first sets up nbstripout as a git filter of this repository only
(`.git/config` and `.git/info/attributes`, nothing tracked): what the learner's runs write into
the notebooks (outputs, execution counts, the kernel's metadata) stays on disk but never reaches
git. Git lists a file whose size changed as modified without filtering it, so after each save
JupyterLab's post-save hook (refresh_git_index) tells git that a notebook whose stripped content
is the committed one is unchanged: `git status` stays clean and `git pull` updates a notebook the
learner only ran (its outputs go; their own edits are kept and shown as theirs).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from workbook.facts import LAB_ARGS, notebook, with_safe_env
from workbook.paths import LEARNER_SCRIPT, NOTEBOOKS_DIR, REPO, STARTER_SCRIPT
from workbook.ports import is_free, taken_words
from workbook.tensorboard import DEFAULT_PORT, PORT_VARIABLE, TensorBoardFailed, ensure_tensorboard

WELCOME_NOTEBOOK = NOTEBOOKS_DIR / notebook("welcome").file_name
START_TIMEOUT_S = 90

# The notebooks a learner runs; the filter applies to them only.
STRIPPED_NOTEBOOKS = "/notebooks/*.ipynb"
# What running and saving a notebook adds besides outputs and counts (nbstripout strips those):
# JupyterLab's language details (the committed notebooks keep only its name) and a cell's
# folded/scrolled state. Cell ids are kept (--keep-id): the builder's ids are the committed ones.
STRIPPED_KEYS = " ".join(
    [
        *(
            f"metadata.language_info.{key}"
            for key in (
                "codemirror_mode",
                "file_extension",
                "mimetype",
                "nbconvert_exporter",
                "pygments_lexer",
                "version",
            )
        ),
        "cell.metadata.jupyter",
        "cell.metadata.trusted",
    ]
)


def git(
    repo: Path, *args: str, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",  # a notebook's text given as input is UTF-8, whatever the locale
        check=check,
        input=input,
    )


def strip_outputs_in_git(repo: Path = REPO) -> str:
    """Set up nbstripout as this repository's git filter for its notebooks; say what was done.

    Only the repository's own `.git/config` and `.git/info/attributes` change (never a global
    setting, never a tracked file). Running it again changes nothing. Outside a git checkout, or
    without git, it does nothing and says so.
    """
    try:
        top = git(repo, "rev-parse", "--show-toplevel", check=False)
    except FileNotFoundError:
        return "git is not installed: notebooks' outputs are not kept out of git"
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repo.resolve():
        return "not a git checkout: nothing to keep the notebooks' outputs out of"
    # First the index, without the filter: git compares by content the files it cannot trust
    # by their times (all of a fresh clone's), and with the filter that runs nbstripout once
    # per notebook: a learner's first `git status` took 20-30 s. Done now, it hashes.
    git(repo, "update-index", "-q", "--refresh", check=False)
    command = f'"{sys.executable}" -m nbstripout --keep-id'
    for key, value in (
        ("filter.nbstripout.clean", command),
        ("filter.nbstripout.smudge", "cat"),
        ("filter.nbstripout.required", "true"),
        ("filter.nbstripout.extrakeys", STRIPPED_KEYS),
        ("diff.ipynb.textconv", f"{command} -t"),
    ):
        git(repo, "config", "--local", key, value)
    attributes = Path(repo, git(repo, "rev-parse", "--git-path", "info/attributes").stdout.strip())
    lines = attributes.read_text().splitlines() if attributes.exists() else []
    wanted = [f"{STRIPPED_NOTEBOOKS} filter=nbstripout", f"{STRIPPED_NOTEBOOKS} diff=ipynb"]
    missing = [line for line in wanted if line not in lines]
    if missing:
        attributes.parent.mkdir(parents=True, exist_ok=True)
        attributes.write_text("\n".join(lines + missing) + "\n")
    return "notebooks' outputs are kept out of git (nbstripout, this repository's git filter)"


ADD_ATTEMPTS = 4
# What nbstripout's command line strips besides outputs and counts before any --extra-keys (its
# main()'s list, nbstripout 0.8): with STRIPPED_KEYS, what the git filter strips.
# tests/smoke/test_notebooks_processes.py checks that stripped_text gives the filter's bytes.
NBSTRIPOUT_KEYS = (
    "metadata.signature",
    "metadata.widgets",
    "cell.metadata.collapsed",
    "cell.metadata.ExecuteTime",
    "cell.metadata.execution",
    "cell.metadata.heading_collapsed",
    "cell.metadata.hidden",
    "cell.metadata.scrolled",
)


def stripped_text(text: str) -> str:
    """A notebook's text as the git filter (nbstripout --keep-id, STRIPPED_KEYS) gives it to git,
    made in this process: a save starts no interpreter (two took 5-45 s on a busy machine, and
    `git status` listed the notebook as modified all that time)."""
    import nbformat
    from nbstripout import strip_output

    notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    keys = [*NBSTRIPOUT_KEYS, *STRIPPED_KEYS.split()]
    strip_output(notebook, keep_output=False, keep_count=False, keep_id=True, extra_keys=keys)
    written = nbformat.writes(notebook)
    return written if written.endswith("\n") else written + "\n"  # as nbformat.write ends it


def forget_outputs(notebook: Path) -> bool:
    """If `notebook` without its outputs is what git has, refresh git's record of it (its size
    and time) so that `git status` does not list it; True if it did. A notebook the learner
    edited (its cells' text, not their outputs) stays listed as modified."""
    notebook = Path(notebook)
    try:
        staged = git(notebook.parent, "ls-files", "--stage", "--", notebook.name).stdout.split()
        if not staged:
            return False
        return _forget_quickly(notebook, staged) or _forget_through_the_filter(notebook, staged)
    except (OSError, subprocess.CalledProcessError):
        return False


def _forget_quickly(notebook: Path, staged: list[str]) -> bool:
    """forget_outputs with the stripping done here, and `git add` given its result through a
    filter that only repeats it: no interpreter starts. False when it can't be sure: the text
    stripped here is not git's, or the file changed meanwhile (then git's record of it is
    emptied, so that `git status` compares its content)."""
    before = notebook.stat()
    try:
        text = stripped_text(notebook.read_text(encoding="utf-8"))
    except Exception:  # not a notebook nbformat reads: the filter decides
        return False
    blob = git(notebook.parent, "hash-object", "--stdin", input=text)
    if blob.stdout.strip() != staged[1]:
        return False
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".ipynb") as known:
        known.write(text)
        known.flush()
        # git feeds the file to the filter: read it, and give back what was stripped here.
        repeat = f"cat >/dev/null; cat {shlex.quote(known.name)}"
        added = _add(notebook, "-c", f"filter.nbstripout.clean={repeat}")
    after = notebook.stat()
    if (after.st_mtime_ns, after.st_size) != (before.st_mtime_ns, before.st_size):
        # Saved again while git read it: git may keep the new file's time with the old text.
        mode, blob_id = staged[0], staged[1]
        git(notebook.parent, "update-index", "--cacheinfo", f"{mode},{blob_id},{notebook.name}")
        return False
    return added


def _forget_through_the_filter(notebook: Path, staged: list[str]) -> bool:
    """forget_outputs by git's own filter (nbstripout run by git, twice)."""
    stripped = git(
        notebook.parent, "hash-object", "--path", notebook.name, "--", notebook.name
    ).stdout.strip()
    if stripped != staged[1]:
        return False
    return _add(notebook)


def _add(notebook: Path, *options: str) -> bool:
    """`git add` of a notebook whose stripped content is the staged one: it only refreshes the
    size and time git keeps. Another git command (a pull, a status in a terminal) may hold the
    index for a moment: it tries again."""
    for attempt in range(ADD_ATTEMPTS):
        if git(notebook.parent, *options, "add", "--", notebook.name, check=False).returncode == 0:
            return True
        time.sleep(1 + attempt)
    return False


def refresh_git_index(os_path: str, model=None, contents_manager=None) -> None:
    """JupyterLab's post-save hook (`make lab` sets it): forget_outputs, off the save's path."""
    if str(os_path).endswith(".ipynb"):
        threading.Thread(target=forget_outputs, args=(Path(os_path),), daemon=True).start()


def ensure_learner_script() -> Path:
    """Give the learner a working copy of the starting script; never overwrite their edits."""
    if not LEARNER_SCRIPT.exists() and STARTER_SCRIPT.exists():
        shutil.copyfile(STARTER_SCRIPT, LEARNER_SCRIPT)
    return LEARNER_SCRIPT


def running_servers() -> list[dict]:
    """Jupyter servers of this environment, as `jupyter server list --json` reports them."""
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "list", "--json"],
        capture_output=True,
        text=True,
    )
    servers = []
    for line in result.stdout.splitlines():
        try:
            servers.append(json.loads(line))
        except ValueError:
            continue
    return servers


def server_for_repo() -> dict | None:
    for server in running_servers():
        if Path(server.get("root_dir", "")).resolve() == REPO.resolve():
            return server
    return None


def lab_url(server: dict) -> str:
    path = (
        WELCOME_NOTEBOOK.relative_to(REPO)
        if WELCOME_NOTEBOOK.exists()
        else NOTEBOOKS_DIR.relative_to(REPO)
    )
    token = f"?token={server['token']}" if server.get("token") else ""
    return f"{server['url'].rstrip('/')}/lab/tree/{path.as_posix()}{token}"


def print_banner(server: dict, tensorboard: str, lab_moved: str = "") -> None:
    print("\n" + "=" * 72, flush=True)
    print(f"  JupyterLab:   {lab_url(server)}" + (f" - {lab_moved}" if lab_moved else ""))
    print(f"  TensorBoard:  {tensorboard}")
    print("  Open the JupyterLab link in your browser. Stop with Ctrl-C.")
    print("=" * 72 + "\n", flush=True)


def start_lab(ip: str, port: int) -> subprocess.Popen:
    default_url = (
        "/lab/tree/"
        + (WELCOME_NOTEBOOK if WELCOME_NOTEBOOK.exists() else NOTEBOOKS_DIR)
        .relative_to(REPO)
        .as_posix()
    )
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={REPO}",
        f"--LabApp.default_url={default_url}",
        "--ServerApp.contents_manager_class=workbook.lab_contents.WorkbookContentsManager",
        "--ContentsManager.post_save_hook=workbook.lab.refresh_git_index",
        *LAB_ARGS,
    ]
    if os.geteuid() == 0:
        # Containers and workshop VMs often run everything as root; Jupyter refuses by default.
        command.append("--allow-root")
    return subprocess.Popen(command)


def wait_for_server(process: subprocess.Popen) -> dict | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        server = server_for_repo()
        if server and server.get("pid") == process.pid:
            return server
        time.sleep(1)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ip", default="127.0.0.1", help="address to listen on (0.0.0.0 on a shared workshop VM)"
    )
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--tensorboard-port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)

    ensure_learner_script()
    print(strip_outputs_in_git())
    try:
        tensorboard = ensure_tensorboard(port=args.tensorboard_port)
        shown_tensorboard = tensorboard.banner()
        # Inherited by JupyterLab's kernels: the notebooks find this one, wherever it is.
        os.environ[PORT_VARIABLE] = str(tensorboard.port)
    except TensorBoardFailed as error:  # the notebooks need it only at the end: go on
        print(f"error: {error}", file=sys.stderr)
        tensorboard, shown_tensorboard = None, "not started (see the error above)"
    # Kernels and terminals inherit these too: without them, a script run with `!python`,
    # `!mpirun` or `!horovodrun` hangs in hvd.init() while TensorBoard listens (see facts.py).
    os.environ.update(with_safe_env())
    existing = server_for_repo()
    if existing:
        print("JupyterLab is already running for this workbook.")
        print_banner(existing, shown_tensorboard)
        return 0

    # JupyterLab itself takes another port when this one is taken (its --port-retries).
    lab_port_taken = None if is_free(args.port, args.ip) else taken_words(args.port)
    started = time.monotonic()
    process = start_lab(args.ip, args.port)
    try:
        server = wait_for_server(process)
        if server is None:
            code = process.poll()
            process.terminate()
            waited = time.monotonic() - started
            why = (
                f"exited with code {code} after {waited:.0f} s"
                if code is not None
                else f"did not answer in the {waited:.0f} s it was given"
            )
            cause = (
                f"; {lab_port_taken}: stop that program or pick another port "
                f"(make lab LAB_ARGS='--port {args.port + 100}')"
                if lab_port_taken
                else ""
            )
            print(f"error: JupyterLab {why} (its messages are above){cause}.", file=sys.stderr)
            return 1
        moved = (
            f"{lab_port_taken}, so this one is on {server.get('port')}"
            if lab_port_taken and server.get("port") != args.port
            else ""
        )
        print_banner(server, shown_tensorboard, moved)
        # Ctrl-C reaches JupyterLab too (same process group); SIGTERM is passed on explicitly.
        signal.signal(signal.SIGTERM, lambda *_: process.terminate())
        try:
            return process.wait()
        except KeyboardInterrupt:
            return process.wait()
    finally:
        if tensorboard is not None:
            tensorboard.stop()


if __name__ == "__main__":
    sys.exit(main())
