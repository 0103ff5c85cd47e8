"""Run a training script under horovodrun from a notebook cell, and show its output readably.

    from workbook.runner import horovodrun
    result = horovodrun("fashion_mnist.py --epochs 3", np="auto")

    %load_ext workbook.runner
    %horovodrun -np auto fashion_mnist.py --epochs 3

What it adds to a bare `!horovodrun ...`:

- `-np auto` picks a layout for this machine: one worker per GPU, or on CPUs 2 workers that
  share the cores (threads per worker set with TF_NUM_INTRAOP_THREADS), printed in one line.
- Output streams live with a `[rank N]` label per line. Keras redraws its progress bar with
  `\\r` and `\\b` hundreds of times; only rank 0's current bar is shown, on one status line that
  also shows the elapsed time. TensorFlow's C++ log lines are kept out of the way.
- The full raw output goes to `<log dir>/horovodrun.log`, and the script gets
  `--log-dir notebooks/logs/<run name>` so that every run appears in the one TensorBoard.
- If a worker fails, its traceback is shown at the end in a red box, not buried in the output
  of the workers that horovodrun stopped because of it.
- Interrupting the cell (or `timeout=`) stops every process horovodrun started, including the
  workers, which horovodrun's launcher puts in sessions of their own. An interrupted cell
  re-raises KeyboardInterrupt after the cleanup, so "Run all" stops there too; the partial
  result is kept in `workbook.runner.last_result`.

horovodrun with Gloo prefixes every line a worker writes with `[<rank>]<stdout>:` or
`[<rank>]<stderr>:` (one prefix per `\\r`- or `\\n`-terminated piece); its own messages
(`Process 1 exit with status code 1.`) carry no prefix. Nothing here imports TensorFlow or
Horovod, so the notebook kernel stays small.

One module per job, each importing only those above it in this list:

    layout      how many workers, and how many threads each
    command     horovodrun's options, the script and its arguments, the hosts
    hosts       which hosts horovodrun reaches with ssh, and a quick check that it can
    plan        everything decided before a run starts
    output      horovodrun's byte stream as Line and Progress events
    transcript  those events sorted into what to show and what to keep aside
    failure     a failed worker's traceback and what its exit code means
    processes   stopping every process horovodrun started
    result      RunResult
    display     Jupyter, terminal, or nothing
    execute     one run from start to the last process stopped
    background  start_in_background() and BackgroundRun
    run         horovodrun() and last_result
    magic       %horovodrun
"""

from workbook.runner import run as _run
from workbook.runner.background import BackgroundRun, start_in_background
from workbook.runner.command import (
    HOROVODRUN_FLAGS,
    TWO_VALUE_OPTIONS,
    split_horovodrun_args,
)
from workbook.runner.failure import exit_code_meaning, rank_error
from workbook.runner.hosts import HostsUnreachable
from workbook.runner.layout import (
    Layout,
    auto_layout,
    explicit_layout,
    usable_cores,
    visible_gpus,
)
from workbook.runner.magic import (
    MagicArgs,
    horovodrun_magic,
    load_ipython_extension,
    parse_magic_line,
)
from workbook.runner.output import Line, OutputParser, Progress
from workbook.runner.plan import RunPlan, plan_run
from workbook.runner.result import RunResult
from workbook.runner.run import horovodrun
from workbook.runner.transcript import Transcript

__all__ = [
    "horovodrun",
    "start_in_background",
    "BackgroundRun",
    "RunResult",
    "HostsUnreachable",
    "Layout",
    "auto_layout",
    "load_ipython_extension",
]


def __getattr__(name: str):
    # Each run replaces run.last_result; a copy made here at import would stay None for good.
    if name == "last_result":
        return _run.last_result
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "last_result"])
