"""Facts that several parts of the workbook need, each in one place.

The runner, the grader, the instructor's course, the authoring tools and the benchmarks all
import what they share from here, and nothing else restates it. Standard library only: the
notebook kernels, nbgrader and the set-up import this module.
"""

from __future__ import annotations

import json
import os
import re

# The learner's working copy, in notebooks/ and in each student's submission.
LEARNER_SCRIPT_NAME = "fashion_mnist.py"

# The twelve graded steps, in order.
STEP_TITLES = {
    1: "Initialize Horovod",
    2: "Pin one GPU per process",
    3: "Print only on rank 0",
    4: "Wrap the optimizer in DistributedOptimizer",
    5: "Broadcast the initial weights from rank 0",
    6: "Split the data and the steps among workers",
    7: "Average the metrics across workers",
    8: "Resume from checkpoints on rank 0",
    9: "Write checkpoints and logs on rank 0 only",
    10: "Scale the learning rate by the number of workers",
    11: "Warm up the learning rate",
    12: "Switch to the NovoGrad optimizer",
}
STEPS = tuple(sorted(STEP_TITLES))
LAST_STEP = STEPS[-1]

# The bonus exercises (the source's `#@ bonus NAME` blocks) and their reference scripts,
# relative to solutions/.
BONUSES = {
    "alexnet": "bonus/fashion_mnist_alexnet.py",
}

# The last line every training script of the workbook prints: `RESULT {json}`, after a launcher's
# prefix such as horovodrun's `[0]<stdout>:`, and up to the line's last `}`: mpirun's
# --tag-output can put its next prefix (`[1,0]<stdout>:`) on the same line.
RESULT_LINE = re.compile(r"RESULT (\{.*\})")


def results(text: str) -> list[dict]:
    """The metrics of every RESULT line in `text`, in order ([] when there is none); ValueError
    when a RESULT line's JSON is not valid."""
    found = []
    for payload in RESULT_LINE.findall(text):
        try:  # `{...}`: valid JSON there is an object
            found.append(json.loads(payload))
        except ValueError as error:
            raise ValueError(f"the RESULT line is not valid JSON: {error}") from None
    return found


def parse_result(text: str) -> dict:
    """The metrics of the last RESULT line in `text` (a whole output, or one line); ValueError,
    saying which, when there is none or one is not valid JSON (see results)."""
    found = results(text)
    if not found:
        raise ValueError("no `RESULT {...}` line in the output")
    return found[-1]


# TensorFlow's C++ logging, and the abseil format newer parts of TensorFlow use.
TF_LOG_LINE = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]"
    r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"  # before InitializeLog: 00:00:<epoch s>
    r"|To enable the following instructions:"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)"
)
TF_SEVERE_LINE = re.compile(r"^(?:\S+ \S+: [EF] |[EF]\d{4} )")  # errors and fatal ones

# Environment every process the workbook starts gets (and learners' terminals should have,
# see INSTALL.md). OpenMPI's hwloc probes X displays through its GL component; anything
# listening on 127.0.0.1:6006 (TensorBoard) looks like display :6, and hvd.init() or mpirun
# then wait forever for an X reply (open-mpi/ompi#10025). Without the GL component, hwloc
# never connects.
SAFE_PROCESS_ENV = {"HWLOC_COMPONENTS": "-gl"}


# Default settings of JupyterLab's plugins for the workbook (overrides.json there): no "Would
# you like to get notified about official Jupyter news?" pop-up over a learner's first notebook.
LAB_SETTINGS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab_settings")

# What every JupyterLab of the workbook is started with: `make lab`'s, and each attendee's on
# the hub (hub/k8s/values.yaml repeats them in YAML; tests/test_hub_parts.py compares).
LAB_ARGS = (
    # window.jupyterapp: a step notebook's Next cell closes it and opens the next one through
    # JupyterLab's own commands (workbook/navigation.py).
    "--LabApp.expose_app_in_browser=True",
    # No calls out for news or new versions from a workshop's machines...
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    # ...and the settings that keep the front end from asking (the environment's own settings
    # folder, share/jupyter/lab/settings, is empty: nothing is lost).
    f"--LabApp.app_settings_dir={LAB_SETTINGS_DIR}",
)


def with_safe_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) plus SAFE_PROCESS_ENV, which the caller's
    own value of a variable overrides."""
    return {**SAFE_PROCESS_ENV, **(os.environ if env is None else env)}


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity, not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def chain_file_name(step: int) -> str:
    """The reference script after `step` in solutions/ (0: the starting script)."""
    if step == 0:
        return LEARNER_SCRIPT_NAME
    return f"fashion_mnist_after_step_{step:02d}.py"


SOLUTION_FILE_NAME = "fashion_mnist_solution.py"  # the chain's last script, in solutions/
