# The Horovod workbook. The two commands a user needs:
#   make lab    set up what is missing, prepare the data, start JupyterLab
#   make test   set up what is missing, run the whole test suite
# For every change: make check (tests/unit and tests/smoke: no root, no apt, a few minutes).
# Options: DEVICE=gpu (CUDA TensorFlow + NCCL Horovod), REBUILD_HOROVOD=1, VENV=$CONDA_PREFIX
#          (use an activated conda env), LAB_ARGS="--port 8899", PYTEST_ARGS="-k data"

PYTHON ?= python3
DEVICE ?= $(if $(filter Darwin,$(shell uname -s)),macos,cpu)
VENV ?= .venv
LAB_ARGS ?=
VPY := $(VENV)/bin/python
# Tools of the environment (horovodrun, jupyter, tensorboard) come first on PATH.
RUN := PATH="$(abspath $(VENV))/bin:$$PATH"
BOOTSTRAP_ARGS := --venv $(VENV) --device $(DEVICE) $(if $(filter 1,$(REBUILD_HOROVOD)),--rebuild-horovod)
# make test wants MPI: Horovod built without it (by an earlier make lab) is rebuilt once
# OpenMPI is there, and a test that needs MPI fails instead of being skipped.
BOOTSTRAP_ARGS += $(if $(filter test,$(MAKECMDGOALS)),--want-mpi)

.PHONY: lab test check env data preflight lock help course grade browser sshd mpi bench bench-check hub sandbox

help:
	@echo "make lab        set up, prepare data, start JupyterLab (prints the URL)"
	@echo "make test       set up, run all tests (root for apt: Chromium, sshd, OpenMPI)"
	@echo "make check      tests/unit + tests/smoke, for every change: no root, no apt, minutes"
	@echo "make env        create/update .venv only (DEVICE=gpu, REBUILD_HOROVOD=1)"
	@echo "make data       prepare the official Fashion-MNIST in data/fashion_mnist (Debian: apt-get)"
	@echo "make preflight  check that the workbook can run here"
	@echo "make browser    install Chromium for the browser test (Debian: apt-get)"
	@echo "make sshd       install OpenSSH's server for the multi-host test (Debian: apt-get)"
	@echo "make mpi        install OpenMPI (Debian: apt-get) so that Horovod is built with MPI"
	@echo "make sandbox    install bubblewrap, the grader's sandbox for students' scripts (apt-get)"
	@echo "make bench      measure scaling, time to accuracy, overhead, grading (BENCH_ARGS=--tiny)"
	@echo "make bench-check  every benchmark on tiny settings, checked (after changing bench/)"
	@echo "make course     instructors: build the nbgrader course in course/ (COURSE=dir)"
	@echo "make grade      instructors: collect, autograde, feedback, grades.csv, class report"
	@echo "                (GRADE_ARGS=\"--run-timeout 60 --run-jobs 2\": autograde's options)"
	@echo "make hub        instructors, root: JupyterHub for a class (HUB_ARGS=\"--roster roster.csv\")"

env:
	@$(PYTHON) -m bootstrap $(BOOTSTRAP_ARGS)

# The official Fashion-MNIST: Debian's dataset-fashion-mnist first, installed when apt-get can
# (root or sudo); prepare says which source it used and why it skipped the others.
data: env
	@sh data/setup_debian_package.sh
	@$(RUN) $(VPY) -m workbook.fashion_data prepare

preflight: env
	@$(RUN) $(VPY) -m workbook.preflight

lab: data
	@$(RUN) $(VPY) -m workbook.lab $(LAB_ARGS)

# The fast tiers run with an empty HOME (tests/fresh_home.py), as on a machine that never ran
# the workbook: a library's one-time set-up (matplotlib's font cache...) is met in every run.
# The system tier runs after them, with the user's HOME (sshd's keys, the Horovod wheel cache),
# also when a fast tier failed; make test fails if either did.
test: mpi env browser sshd sandbox
	@$(RUN) WORKBOOK_REQUIRE_MPI=1 $(VPY) tests/fresh_home.py -m pytest tests/unit tests/smoke $(PYTEST_ARGS); \
	fast=$$?; test $$fast -ne 5 || fast=0; \
	$(RUN) WORKBOOK_REQUIRE_MPI=1 $(VPY) -m pytest tests/system -m "not bench" $(PYTEST_ARGS); \
	full=$$?; test $$full -ne 5 || full=0; \
	test $$fast -eq 0 && test $$full -eq 0

# The fast tiers, by folder: tests/unit (starts no process; its conftest.py fails a test that
# does) and tests/smoke (short processes and the few real 2-worker runs on the sample).
# tests/system (real runs, servers, browsers, nbgrader) is left to make test. No root, no apt;
# about 2-3 minutes on 2 cores.
check: env
	$(RUN) $(VPY) -m pytest tests/unit tests/smoke $(PYTEST_ARGS)

browser:
	@sh tests/setup_browser.sh

sshd:
	@sh tests/setup_sshd.sh

# bubblewrap for grader/running/sandbox.py: `make grade` fails without it (a student's script is
# never run unsandboxed); `make test` needs it too (as root, tests/system/test_sandbox.py fails
# without it).
sandbox:
	@SANDBOX_REQUIRED=$(if $(filter grade,$(MAKECMDGOALS)),1,0) sh tests/setup_sandbox.sh

# OpenMPI for Horovod's MPI controller and tests/system/test_mpirun.py. Before env: the bootstrap
# builds Horovod with MPI only when it finds mpicxx (the extra line keeps that order under -j).
mpi:
	@sh tests/setup_mpi.sh
env: $(if $(filter test,$(MAKECMDGOALS)),mpi)

# Benchmarks: JSON and PNG in bench/results (about an hour on 2 cores; BENCH_ARGS="scaling --tiny").
BENCH_ARGS ?= all
bench: data
	$(RUN) $(VPY) -m bench $(BENCH_ARGS)

# Every benchmark run on tiny settings, checked for well-formed JSON and PNG (about 6 minutes on
# 2 cores: measuring, not testing, so make test leaves it out). Run it after changing bench/.
bench-check: env data sandbox
	$(RUN) $(VPY) -m pytest tests/system -m bench $(PYTEST_ARGS)

# Refresh the full pin list after changing requirements/*.txt (CPU variant).
lock: env
	@(echo "# Every package of the CPU environment, pinned (generated by \`make lock\`; bootstrap installs with -c)."; \
	  $(VPY) -m pip freeze --exclude horovod --exclude horovod-workbook) > requirements/constraints.txt
	@$(VPY) -m bootstrap.pins requirements/constraints.txt  # each pin installs on Python 3.11.0

# Instructors: the nbgrader course (see instructor/README.md).
COURSE ?= course
course: env
	@test -f $(COURSE)/nbgrader_config.py || $(RUN) $(VPY) -m instructor init $(COURSE)
	@$(RUN) $(VPY) -m instructor generate $(COURSE)

# Collect (skipped when nothing came through the exchange), autograde, feedback, grades.csv and
# the class report; then exit 1 if autograde could not grade a submission (the report says why).
# GRADE_ARGS: autograde's options (--run-timeout S, --run-jobs N, --no-run: python -m instructor
# autograde --help).
grade: env sandbox
	@$(RUN) $(VPY) -m instructor collect $(COURSE)
	@$(RUN) $(VPY) -m instructor autograde $(COURSE) $(GRADE_ARGS); graded=$$?; \
	test $$graded -le 1 || exit $$graded; \
	$(RUN) $(VPY) -m instructor feedback $(COURSE) && \
	$(RUN) $(VPY) -m instructor export $(COURSE) $(COURSE)/grades.csv && \
	$(RUN) $(VPY) -m instructor report $(COURSE) && exit $$graded

# Instructors, as root on a workshop VM: a JupyterHub for the class (hub/__init__.py, INSTALL.md
# "Workshop VM"). HUB_ARGS: --roster roster.csv (the first time), --port 8000, --https (a
# self-signed certificate) or --ssl-cert FILE --ssl-key FILE, --memory-per-attendee 3G,
# --instructor NAME; re-running it starts only what is missing. Each attendee's password is on
# the sheet it names. Stop it with `.venv/bin/python -m hub down` (--remove-accounts deletes
# the accounts it made).
HUB_ARGS ?=
hub: data
	@$(RUN) $(VPY) -m hub up $(HUB_ARGS)
