"""Run a training script under horovodrun from a notebook cell, and show its output readably.

    from workbook.runner import horovodrun
    result = horovodrun("fashion_mnist.py --epochs 3", np="auto")

    %load_ext workbook.runner
    %horovodrun -np auto fashion_mnist.py --epochs 3

What it adds to a bare `!horovodrun ...`:

- `-np auto` picks a layout for this machine: one worker per GPU on 2 or more GPUs, or 2
  workers that share the CPU cores (threads per worker set with TF_NUM_INTRAOP_THREADS, each
  worker pinned to its own cores by pin_cores.py), printed in one line. Workers are never
  given fewer GPUs than there are of them: the lesson's gpus[hvd.local_rank()] would fail, so
  such a layout (1 GPU and np="auto" or 2, 2 GPUs and np=4) runs on the CPU with the GPUs
  hidden (CUDA_VISIBLE_DEVICES=""), and its line says so and why. `share="auto"` gives any number of
  workers that same share each: `np=1, share="auto"` is the fair 1-worker reference.
- One options object, `RunOptions` (np, run_name, timeout, env, cwd, log dirs, launcher,
  share, timeline...), is built once from the keywords of horovodrun(), start_in_background()
  or plan_run() and handed down; the benchmarks (bench/) and the run-for-real check
  (grader/running) start their workers with it too, planned by the same plan_run and supervised by
  the same execute (one time limit, one clean-up).
- `timeline=True` records Horovod's timeline; every run leaves run.json (start, end, layout)
  and names the other processes that kept the CPU busy meanwhile.
  A -np smaller than the slots of -H is refused: horovodrun 0.28.1 with Gloo would start a
  worker on every slot anyway.
- Output streams live with a `[rank N]` label per line. Keras redraws its progress bar with
  `\\r` and `\\b` hundreds of times; only rank 0's current bar is shown, on one status line that
  also shows the elapsed time, and only the finished bar of each epoch stays as a line,
  however the output was cut into pieces. TensorFlow's C++ log lines and known harmless
  warnings (TensorFlow Addons' end-of-life notice, Keras' HDF5 notice) are kept out of the way.
- The full raw output goes to `<log dir>/horovodrun.log`, and the script gets
  `--log-dir notebooks/logs/<run name>` so that every run appears in the one TensorBoard.
- If a worker fails, its traceback is shown at the end in a red box, not buried in the output
  of the workers that horovodrun stopped because of it.
- It never hangs on a port: every process it starts gets workbook.facts.with_safe_env()
  (OpenMPI's hwloc would take TensorBoard on port 6006 for an X display and wait forever).
- Interrupting the cell (or `timeout=`) stops every process of the run: the workers, which
  horovodrun's launcher puts in sessions of their own, OpenMPI's daemons, which leave the
  process tree (all carry the run's marker, WORKBOOK_RUN_ID, in their environment), and the
  workers on other hosts, over ssh. An interrupted cell re-raises KeyboardInterrupt after the
  clean-up, so "Run all" stops there too; the partial result is kept in
  `workbook.runner.last_result`.

Nothing here imports TensorFlow, so the notebook kernel stays small; Horovod's launcher module
(not its frameworks) is imported when the first command line is read. One module per job, each
importing only those above it in this list:

    horovodrun_cli  horovodrun's options, as horovodrun's own parser knows them; the split of
                a command line into horovodrun's options and the script
    hosts       which hosts are this machine; ssh to the others: a check before, a clean-up after
    layout      how many workers, how many threads each, pinned or not
    command     the run's options (RunOptions), the pieces of its plan (the script, the hosts,
                the log places, the worker's and horovodrun's command lines, the environment),
                and plan_run(), which puts them together
    pin_cores   run by path before the script: pins a worker to its own cores (stdlib only)
    horovod_build  what Horovod was built with (Gloo, MPI), asked once and kept on disk
    launcher    run as `python -m`, never imported: horovodrun with that build check
                answered, 3-6 s less per launch
    contention  the other processes that used the CPU while a run went on
    output      the byte stream as lines and progress bars, sorted into what to show; failures
    processes   finding and stopping every process a run started on this machine
    display     RunResult; the run shown in Jupyter, a terminal, or nowhere
    record      run.json, the run's facts next to its log
    execute     one run from start to the last process stopped, in small parts (start, output,
                supervision, clean-up, result); the benchmarks call it too
    cell        horovodrun() in a notebook cell, start_in_background() and BackgroundRun
    magic       %horovodrun
"""

from workbook.runner import cell as _cell
from workbook.runner.cell import BackgroundRun, horovodrun, start_in_background
from workbook.runner.command import RunOptions, plan_run
from workbook.runner.display import RunResult
from workbook.runner.horovodrun_cli import split_horovodrun_args
from workbook.runner.hosts import HostsUnreachable
from workbook.runner.layout import Layout, auto_layout, explicit_layout, visible_gpus
from workbook.runner.magic import horovodrun_magic, load_ipython_extension, parse_magic_line
from workbook.runner.output import (
    Line,
    OutputParser,
    Progress,
    Transcript,
    exit_code_meaning,
    rank_error,
)

__all__ = [
    "horovodrun",
    "start_in_background",
    "BackgroundRun",
    "RunResult",
    "HostsUnreachable",
    "Layout",
    "RunOptions",
    "auto_layout",
    "load_ipython_extension",
]


def __getattr__(name: str):
    # Each run replaces cell.last_result; a copy made here at import would stay None for good.
    if name == "last_result":
        return _cell.last_result
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "last_result"])
