"""Facts that several parts of the workbook need, each in one place.

The runner, the grader, the instructor's course, the authoring tools and the benchmarks all
import what they share from here, and nothing else restates it. Standard library only: the
notebook kernels, nbgrader and the set-up import this module.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
from dataclasses import dataclass

# The learner's working copy, in notebooks/ and in each student's submission.
LEARNER_SCRIPT_NAME = "fashion_mnist.py"

# What a notebook is for: the welcome and baseline (a lesson), one graded step each, the final
# distributed run, and the bonus notebooks after it (no points).
LESSON, STEP, RUN, BONUS = "lesson", "step", "run", "bonus"


@dataclass(frozen=True)
class Notebook:
    """One notebook of notebooks/: its source is notebooks/src/SLUG.md, its file NN_SLUG.ipynb,
    where NN is its place in NOTEBOOKS (a notebook's number is not its step's)."""

    number: int
    slug: str
    kind: str
    step: int | None = None  # the step a STEP notebook teaches and grades
    title: str | None = None  # that step's title (STEP_TITLES)

    @property
    def stem(self) -> str:
        return f"{self.number:02d}_{self.slug}"

    @property
    def file_name(self) -> str:
        return f"{self.stem}.ipynb"

    @property
    def source_name(self) -> str:
        return f"{self.slug}.md"


# Every notebook, in reading order: the manifest that numbers the notebook files and from which
# the steps, the course, the authoring tools and the notebooks' cross-references derive.
NOTEBOOKS = tuple(
    Notebook(number, *entry)
    for number, entry in enumerate(
        [
            ("welcome", LESSON),
            ("initialize_horovod", STEP, 1, "Initialize Horovod"),
            ("pin_gpu", STEP, 2, "Pin one GPU per process"),
            ("print_on_rank_0", STEP, 3, "Print only on rank 0"),
            ("distributed_optimizer", STEP, 4, "Wrap the optimizer in DistributedOptimizer"),
            ("broadcast_weights", STEP, 5, "Broadcast the initial weights from rank 0"),
            ("split_the_work", STEP, 6, "Split the data and the steps among workers"),
            ("average_metrics", STEP, 7, "Average the metrics across workers"),
            ("resume_on_rank_0", STEP, 8, "Resume from checkpoints on rank 0"),
            ("write_on_rank_0", STEP, 9, "Write checkpoints and logs on rank 0 only"),
            ("scale_learning_rate", STEP, 10, "Scale the learning rate by the number of workers"),
            ("warmup", STEP, 11, "Warm up the learning rate"),
            ("novograd", STEP, 12, "Switch to the NovoGrad optimizer"),
            ("run_distributed", RUN),
            ("several_hosts", BONUS),
            ("slurm_and_mpirun", BONUS),
            ("add_a_model", BONUS),
            ("input_pipeline", BONUS),
            ("elastic_training", BONUS),
            ("where_does_the_time_go", BONUS),
        ]
    )
)

# The graded steps, in order, from the step notebooks.
STEP_TITLES = {notebook.step: notebook.title for notebook in NOTEBOOKS if notebook.kind == STEP}
STEPS = tuple(sorted(STEP_TITLES))
LAST_STEP = STEPS[-1]


def step_modules(package: str, path) -> dict:
    """Every module step_NN.py of a package (its name and __path__), keyed by the STEP it
    declares, in step order: a step's part is found, not listed (ImportError when two modules
    declare one step). tests/unit/test_manifest.py checks the steps found are STEPS."""
    found = {}
    for module in pkgutil.iter_modules(path):
        if module.name.startswith("step_"):
            part = importlib.import_module(f"{package}.{module.name}")
            if part.STEP in found:
                raise ImportError(
                    f"{module.name} and {found[part.STEP].__name__} both check step {part.STEP}"
                )
            found[part.STEP] = part
    return dict(sorted(found.items()))


def notebook(slug: str) -> Notebook:
    """The notebook of NOTEBOOKS named `slug`; KeyError names the known ones."""
    for entry in NOTEBOOKS:
        if entry.slug == slug:
            return entry
    raise KeyError(f"no notebook {slug!r} in facts.NOTEBOOKS: {[n.slug for n in NOTEBOOKS]}")


def step_notebook(step: int) -> Notebook:
    """The notebook that teaches and grades `step`."""
    for entry in NOTEBOOKS:
        if entry.step == step:
            return entry
    raise KeyError(f"no notebook of step {step!r} in facts.NOTEBOOKS")


def notebook_of_kind(kind: str) -> Notebook:
    """The one notebook of `kind` (the lesson, the run); ValueError when there are several."""
    found = [entry for entry in NOTEBOOKS if entry.kind == kind]
    if len(found) != 1:
        raise ValueError(f"{len(found)} notebooks of kind {kind!r}, not 1")
    return found[0]


def notebook_label(slug: str) -> str:
    """How texts name a notebook: 'notebook 13'."""
    return f"notebook {notebook(slug).number:02d}"


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
# the hub (hub/k8s/values.yaml repeats them in YAML; tests/unit/test_hub_parts.py compares).
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
