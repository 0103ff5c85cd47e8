"""The run check's configuration and limits (grader/running/run_check.py, run_clock.py) and what the
probe counts as code not the script's own (grader/running/probe.py), without starting a process.
The real runs are in tests/system/test_run_configuration_runs.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.reference import reference_path
from grader.running import probe, run_check, run_clock
from grader.running.expected import Recipe, preset_value
from grader.running.outcome import NOT_RUN
from grader.running.run_clock import MIN_SHARE, RunClock
from workbook.facts import LAST_STEP

# Values a learner may write in by hand instead of the option (issue 37, item 4).
CONSTANTS = {0, 1, 2, 5, 32, 64, 128}


def solution_preset(key: str):
    return preset_value(reference_path(LAST_STEP), "cpu", key)


def test_no_constant_a_learner_may_write_in_matches_the_first_launch():
    preset = {solution_preset(k) for k in ("warmup_epochs", "batch_size")}
    for key in ("warmup_epochs", "batch_size", "train_images", "val_batch_size", "test_images"):
        assert run_check.ASKED[key] not in CONSTANTS | preset, key
    assert tuple(run_check.ASKED["lr_drops"]) != tuple(solution_preset("lr_drops"))
    assert run_check.ASKED["warmup_epochs"] != preset_value(
        reference_path(LAST_STEP), "gpu", "warmup_epochs"
    )


@pytest.mark.parametrize("warmup", sorted(CONSTANTS - {64, 32, 128}))
def test_a_hard_coded_warmup_gives_another_schedule(warmup):
    """The rates of the first launch's epochs differ from those of a warmup written in."""
    asked = Recipe(0.00625, 2, run_check.ASKED["warmup_epochs"], tuple(run_check.ASKED["lr_drops"]))
    written = Recipe(0.00625, 2, warmup, tuple(run_check.ASKED["lr_drops"]))
    steps = run_check.ASKED["train_images"] // run_check.ASKED["batch_size"] // 2
    assert any(
        asked.rates(e, steps) != written.rates(e, steps) for e in range(run_check.FIRST_EPOCHS)
    )


def test_the_resume_uses_the_scripts_defaults_and_the_same_schedule():
    """Launch 2 passes only the model's size and --epochs; the preset's own drop (index 3:
    epoch 4) gives the epochs it trains the rates launch 1's options imply: one recipe holds
    both."""
    second = run_check._launch(2, Path("/data"), {})
    options = [a for a in second.args if a.startswith("--")]
    assert options == ["--depth", "--width", "--epochs", "--data-dir"]
    assert second.hosts == [] and probe.SIMULATED_GPUS_VARIABLE not in second.env
    asked = Recipe(0.00625, 2, run_check.ASKED["warmup_epochs"], tuple(run_check.ASKED["lr_drops"]))
    defaults = Recipe(
        0.00625, 2, solution_preset("warmup_epochs"), tuple(solution_preset("lr_drops"))
    )
    resumed = range(run_check.FIRST_EPOCHS, run_check.FINAL_EPOCHS)
    for epoch in resumed:
        assert asked.rate(epoch, 0, 1) == defaults.rate(epoch, 0, 1) < asked.scaled_lr
    # The first launch trains the warmup, the full rate and the drop.
    first = [asked.rate(e, 0, 1) for e in range(run_check.FIRST_EPOCHS)]
    assert first[0] < asked.scaled_lr and asked.scaled_lr in first and first[-1] < asked.scaled_lr
    # A drop by a number from the drop on (Horovod's multiplier=0.1 means
    # 0.1 ** (epoch - start_epoch): no drop in its first epoch, x0.1 each epoch after) shows in
    # the first launch; one started with the warmup's end shows in the second.
    drop = run_check.ASKED["lr_drops"][0]
    assert asked.scaled_lr * 0.1 ** (drop - drop) != asked.rate(drop, 0, 1)
    warmup = run_check.ASKED["warmup_epochs"]
    assert any(asked.scaled_lr * 0.1 ** (e - warmup) != defaults.rate(e, 0, 1) for e in resumed)
    # The preset's batches fit the keyed data: a step per worker, a validation step per worker.
    assert run_check.KEYED_TRAIN_IMAGES // solution_preset("batch_size") // run_check.WORKERS >= 1
    assert run_check.KEYED_TEST_IMAGES // 32 // run_check.WORKERS >= 1


def test_the_first_launch_has_simulated_gpus_on_two_hosts_of_one_slot():
    first = run_check._launch(1, Path("/data"), {})
    assert first.env[probe.SIMULATED_GPUS_VARIABLE] == "1"
    hosts = first.hosts[first.hosts.index("-H") + 1].split(",")
    assert len(hosts) == run_check.WORKERS and all(h.endswith(":1") for h in hosts)
    assert "--network-interfaces" in first.hosts


# --- the run's clock ----------------------------------------------------------------------------


def clock_after(
    interval: float, run_cpu: float, waited: float, machine_cpu: float, monkeypatch, cores: int = 2
) -> RunClock:
    """A clock ticked once over `interval` s in which the run used `run_cpu` CPU-seconds and
    waited `waited` s for a core, and the whole machine used `machine_cpu` CPU-seconds."""
    times, machine = iter([0.0, interval]), iter([0.0, machine_cpu])
    monkeypatch.setattr(run_clock, "time", SimpleNamespace(monotonic=lambda: next(times)))
    monkeypatch.setattr(run_clock, "machine_busy_seconds", lambda: next(machine))
    monkeypatch.setattr(run_clock, "waited_seconds", lambda pid: {1: waited})
    monkeypatch.setattr(
        RunClock, "_note_cpu", lambda self, pid: self._cpu.__setitem__(pid, (run_cpu, True))
    )
    clock = RunClock(cores=cores)
    clock.start()
    clock._cpu[1], clock._waited[(1, 1)] = (0.0, True), 0.0
    clock.tick([1])
    return clock


def test_a_quiet_machine_counts_every_second(monkeypatch):
    clock = clock_after(10, run_cpu=15, waited=0.5, machine_cpu=15.5, monkeypatch=monkeypatch)
    assert clock.counted == pytest.approx(10) and clock.share_given() == pytest.approx(1)


def test_a_machine_busy_with_others_counts_only_what_it_left(monkeypatch):
    """Two busy neighbours on 2 cores take half of the machine: half of the time counts."""
    clock = clock_after(10, run_cpu=10, waited=10, machine_cpu=20, monkeypatch=monkeypatch)
    assert clock.counted == pytest.approx(5) and clock.starved == pytest.approx(10)


def test_a_run_that_starves_itself_counts_in_full(monkeypatch):
    """Its own busy processes keep its workers waiting: nothing outside the run used the CPU."""
    clock = clock_after(10, run_cpu=20, waited=20, machine_cpu=20, monkeypatch=monkeypatch)
    assert clock.counted == pytest.approx(10)


def test_a_run_that_sleeps_counts_in_full_however_busy_the_machine(monkeypatch):
    """A hang waits for nothing: others using the machine don't slow it."""
    clock = clock_after(10, run_cpu=0.1, waited=0.0, machine_cpu=20, monkeypatch=monkeypatch)
    assert clock.counted == pytest.approx(10)


def test_even_a_saturated_machine_counts_a_little(monkeypatch):
    clock = clock_after(10, run_cpu=0, waited=10, machine_cpu=20, monkeypatch=monkeypatch)
    assert clock.counted == pytest.approx(10 * MIN_SHARE)


def test_the_limits_name_what_the_script_did():
    clock = RunClock(cores=2, counted=50, wall=60)
    clock._cpu = {1: (20.0, False), 2: (90.0, False), 3: (1.0, True)}  # pid 3: horovodrun
    clock._names = {1: "python probe.py", 2: "python probe.py", 3: "horovodrun"}
    why, _ = run_check._over_a_limit(clock, 40, 2, still=0, workers={1})
    assert "did not finish within 40 s of the machine's time" in why
    assert "90 s of it went to processes beside the workers" in why
    assert "(python probe.py)" in why  # a process the script forked runs the probe too
    clock.counted = 10
    why, _ = run_check._over_a_limit(clock, 40, 2, still=0, workers={1, 2})
    assert "111 s of CPU time, more than 80 s" in why and "beside" not in why
    clock._cpu = {1: (3.0, False)}
    assert run_check._over_a_limit(clock, 40, 2, still=run_check.STALL_S - 1) is None
    why, _ = run_check._over_a_limit(clock, 40, 2, still=run_check.STALL_S)
    assert why.startswith(f"no rank got any further for {run_check.STALL_S} s")


def test_a_cut_says_how_little_the_machine_gave():
    clock = RunClock(cores=2, counted=30, wall=720, starved=700)
    assert run_check._machine_cut(clock, 120) == (
        "in 720 s on the clock the machine gave the run only 30 s of its 120 s (4%: other "
        "processes held the cores for 700 s)"
    )


def test_the_clock_reads_this_machine():
    """The counters it needs exist here: /proc/stat and the run-queue delay of each thread."""
    from grader.running.run_clock import machine_busy_seconds, waited_seconds

    assert machine_busy_seconds() > 0
    assert waited_seconds(os.getpid()), "no /proc/PID/task/TID/schedstat"


# --- only the script's own code earns points ---------------------------------------------------


@pytest.mark.parametrize("step", [4, 9, LAST_STEP])
def test_a_reference_script_up_to_formatting_is_named(tmp_path, step):
    text = reference_path(step).read_text()
    lines = text.splitlines()
    # Comments go, a blank line and a docstring change: the same code.
    reformatted = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    reformatted = reformatted.replace('"""', '"""Mine. ', 1) + "\n\n\n"
    script = tmp_path / "fashion_mnist.py"
    script.write_text(reformatted)
    assert run_check.copy_of_reference(script) == f"solutions/{reference_path(step).name}"
    script.write_text(text.replace("hvd.rank() == 0", "hvd.rank() == 0 and True", 1))
    assert run_check.copy_of_reference(script) == ""


def test_the_starting_script_is_not_called_a_copy(tmp_path):
    script = tmp_path / "fashion_mnist.py"
    script.write_text(reference_path(0).read_text())
    assert run_check.copy_of_reference(script) == ""


def test_a_pass_shown_by_code_not_the_scripts_earns_nothing():
    from grader.report import CANT_TELL, FAILED, PASSED, Result

    shown = Result(PASSED, "t", "every rank has the same weights", step=5)
    taken = run_check.not_earned(shown, ["ran /repo/solutions/fashion_mnist_solution.py"])
    assert taken.status != PASSED and taken.status in (FAILED, CANT_TELL)
    assert "ran /repo/solutions/fashion_mnist_solution.py" in taken.message
    failed = Result(FAILED, "t", "ranks differ", step=5)
    assert run_check.not_earned(failed, ["x"]) is failed


def test_the_probe_names_modules_imported_from_outside(monkeypatch, tmp_path):
    script = str(tmp_path / "fashion_mnist.py")
    outside = tmp_path / "solutions" / "helper.py"
    fake = type(sys)("helper_from_outside")
    fake.__file__ = str(outside)
    monkeypatch.setitem(sys.modules, "helper_from_outside", fake)
    found = probe.foreign_modules(script)
    assert f"imported helper_from_outside from {outside}" in found
    # Python's own modules, the packages' and the script itself are not foreign.
    mine = type(sys)("__main__x")
    mine.__file__ = script
    monkeypatch.setitem(sys.modules, "__main__x", mine)
    assert not any(
        "__main__x" in entry or "json" in entry.split()[1]
        for entry in probe.foreign_modules(script)
    )


def test_training_code_from_a_string_is_told_from_generated_code():
    trains = compile("import horovod.tensorflow.keras as hvd\nmodel.fit(x)\n", "<string>", "exec")
    generated = compile("def __init__(self, a):\n    self.a = a\n", "<string>", "exec")
    assert probe.code_names(trains) & probe.TRAINING_NAMES
    assert not probe.code_names(generated) & probe.TRAINING_NAMES


# --- a run the machine cut --------------------------------------------------------------------


def test_a_run_the_machine_cut_twice_is_no_verdict(monkeypatch, tmp_path):
    """Cut once: run again alone; cut alone too: not run (the machine's fault), saying both."""
    tries = []

    def cut_attempt(step, path, runs, np, timeout, work_dir, sandbox, say, alone=False):
        tries.append(alone)
        folder = tmp_path / f"try{len(tries)}"
        folder.mkdir()
        return run_check.Attempt(folder, None, 1, 700.0, RunClock(), cut=f"cut {len(tries)}")

    monkeypatch.setattr(run_check, "_attempt", cut_attempt)
    result = run_check.run_step(LAST_STEP, reference_path(LAST_STEP), quiet=True)
    assert tries == [False, True]
    assert result.run.outcome == NOT_RUN and not result.file_problem
    assert "this machine was too busy to run the script, twice: cut 2" in result.message
    assert result.run.reruns == ["run again alone: cut 1", "cut again: cut 2"]


def test_a_run_alone_waits_for_the_other_checks(monkeypatch, tmp_path):
    import fcntl

    monkeypatch.setattr(run_check, "LOCK_PATH", tmp_path / "lock")
    with run_check._turn(alone=False), run_check._turn(alone=False):  # checks side by side
        with open(tmp_path / "lock") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with run_check._turn(alone=True), open(tmp_path / "lock") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)


def test_a_worker_killed_while_the_machine_ran_out_of_memory_is_the_machines_doing(tmp_path):
    for rank in (0, 1):
        record = probe.Record(str(tmp_path), "/x/fashion_mnist.py", 1, rank)
        record.data["finished"] = rank == 0
        record.save()
    clock = RunClock(lowest_memory=0.01)
    assert run_check._killed_for_memory(clock, tmp_path, 2, None)
    assert not run_check._killed_for_memory(RunClock(lowest_memory=0.4), tmp_path, 2, None)
    box = SimpleNamespace(hit=lambda: ["memory"])  # the box's own limit: the script's doing
    assert not run_check._killed_for_memory(clock, tmp_path, 2, box)
    record.data["error"] = {"type": "MemoryError", "message": "", "line": 3, "code": ""}
    record.save()
    assert not run_check._killed_for_memory(clock, tmp_path, 2, None)


def test_a_run_cut_once_says_so_in_its_verdict(monkeypatch, tmp_path):
    """Cut once, then a run alone that ends (here: a launch that could not start): the
    second go decides, and the first go's cut is said."""
    tries = []

    def attempt(step, path, runs, np, timeout, work_dir, sandbox, say, alone=False):
        tries.append(alone)
        if not alone:
            folder = tmp_path / "first"
            folder.mkdir()
            return run_check.Attempt(folder, None, 1, 700.0, RunClock(), cut="the machine was busy")
        raise RuntimeError("no horovodrun")

    monkeypatch.setattr(run_check, "_attempt", attempt)
    result = run_check.run_step(LAST_STEP, reference_path(LAST_STEP), quiet=True)
    assert tries == [False, True]
    assert "could not start: no horovodrun" in result.message
    assert result.run.reruns == ["run again alone: the machine was busy"]


def test_the_class_report_names_re_runs_code_not_their_own_and_copies():
    from instructor.class_report import GRADED, ClassReport, StudentRow

    rows = [
        StudentRow("ana", GRADED, {1: True}, reruns=["run again alone: the machine was busy"]),
        StudentRow(
            "ben", GRADED, {1: False}, not_own=["ran /repo/solutions/fashion_mnist_solution.py"]
        ),
        StudentRow("cy", GRADED, {1: True}, copy_of="solutions/fashion_mnist_solution.py"),
        StudentRow("dee", GRADED, {1: True}, swapped="a second run with step 7's line 403 ..."),
    ]
    text = ClassReport("horovod_steps", [1], rows).summary()
    assert "the steps after it shown by a second run:\n" in text
    assert "dee: a second run with step 7's line 403 ..." in text
    assert "ana: run again alone: the machine was busy" in text
    assert "ben: ran /repo/solutions/fashion_mnist_solution.py" in text
    assert "cy: solutions/fashion_mnist_solution.py" in text
