"""How busy the machine is, said at once and used by every estimate (workbook.machine_load,
the runner's live line, workbook.estimates before a run has a pace of its own)."""

import re

import pytest

from workbook import estimates, machine_load
from workbook.machine_load import Load
from workbook.runner.contention import BusyProcess, ContentionMonitor

QUIET = Load(share=0.02, cores=2, load_average=0.3)
BUSY = Load(share=0.95, cores=2, load_average=13.2)  # the machine: load 13-24


def test_a_busy_machine_slows_a_run_by_what_the_others_want():
    assert QUIET.slowdown == pytest.approx(1.02) and not QUIET.busy
    # They took nearly all of it and want more: the load average says how much.
    assert BUSY.slowdown == pytest.approx((2 + 13.2) / 2) and BUSY.busy
    assert Load(0.3, 2, 9.0).slowdown == pytest.approx(1.3)  # took 30%: wanted no more
    # The threads they had ready while sampled say it better than a minute's load average
    # (issue 39: 61% taken, load 9.7, and the baseline took 2.4x, not 5.8x).
    assert Load(0.61, 2, 9.7, runnable=2.9).slowdown == pytest.approx((2 + 2.9) / 2)
    assert Load(0.95, 2, 1.0, runnable=0.4).slowdown == pytest.approx((2 + 1.9) / 2)  # took
    assert BUSY.describe() == "other programs are taking 95% of the CPU (2 cores, load 13.2)"
    assert BUSY.describe(past=True).startswith("other programs took 95%")


def test_the_load_is_measured_here_and_now():
    load = machine_load.load_now(0.2)
    assert 0.0 <= load.share <= 1.0 and load.cores >= 1 and load.slowdown >= 1.0
    assert load.runnable is not None and load.runnable >= 0  # Linux's /proc/stat, read here


def test_the_estimates_before_a_run_scale_the_quiet_machines_time_by_the_load_now():
    # The quiet figure is the committed run profile's (bench/results), whatever it is now.
    quiet = estimates.check_run(2, 120, load=QUIET)
    figures = re.match(
        r"(\d+)-(\d+) s on the benchmark's quiet 2-core machine, and this one is quiet now; "
        r"never more than 120 s of the machine's time$",
        quiet,
    )
    assert figures, quiet
    low, high = (float(figure) for figure in figures.groups())
    busy = estimates.check_run(2, 120, load=BUSY)
    scaled = re.search(
        r"now other programs are taking 95% of the CPU \(2 cores, load 13.2\); while they do, "
        r"about (\d+)-(\d+) s here \(1.9x\), up to ([\d.]+) min if they get all they want "
        r"\(7.6x\); never",
        busy,
    )
    assert scaled, busy
    # What the others took (1.95x the quiet figures) and, at most, what they want (7.6x the
    # quiet high), each rounded on its own: to the second, to a tenth of a minute.
    for figure, quiet in zip(scaled.groups()[:2], (low, high)):
        assert float(figure) == pytest.approx(quiet * BUSY.slowdown_taken, abs=0.5 * 1.95 + 1)
    assert float(scaled.group(3)) * 60 == pytest.approx(high * BUSY.slowdown, abs=0.5 * 7.6 + 3)
    assert "10-40 s" not in busy
    baseline = estimates.before_baseline(load=BUSY)
    assert "the baseline took 5.1-5.6 min from launch to end" in baseline
    assert (
        "while they do, about 10.0-11.0 min here (1.9x), up to 42.8 min if they get all they "
        "want (7.6x)"
    ) in baseline
    assert "about 5.1-5.6 min here if it is as fast" in estimates.before_baseline(load=QUIET)


def test_a_run_slowed_by_other_programs_says_so_at_once_in_one_line():
    monitor = ContentionMonitor(cores=2)
    monitor.sampled_seconds, monitor.others_core_seconds = 2.0, 2.0
    assert monitor.slowed_line() is None  # too soon to tell
    monitor.sampled_seconds, monitor.others_core_seconds = 6.0, 0.3
    assert monitor.slowed_line() is None  # 5%: not worth a line
    monitor.others_core_seconds = 7.2
    monitor.busy[42] = BusyProcess(42, "python busy.py", busy_seconds=6.0, core_seconds=5.9)
    line = monitor.slowed_line()
    assert line == (
        "Slowed by other programs: in the run's first 6 s they took 60% of the CPU "
        "(2 cores), which can make it up to 100% longer; its times will say so (the "
        "busiest: python busy.py, pid 42)."
    )
    assert "\n" not in line and "`" not in line


def test_the_baselines_time_is_scaled_from_its_own_load_to_this_moments():
    from run_folders import times

    baseline = times("baseline", epochs=(100.0, 100.0), share=None)  # 230 s, no samples
    assert "At this moment's load" not in estimates.expect_like_baseline(baseline, load=QUIET)
    busy_now = estimates.expect_like_baseline(baseline, load=BUSY)
    assert (
        "At this moment's load (other programs are taking 95% of the CPU (2 cores, load "
        "13.2)): about 7.5 min."
    ) in busy_now  # 230 s x 1.95, what the others took
    # Measured under load (its samples: 200 core-seconds in 200 s on 2 cores, 50%), now quiet.
    loaded = times("baseline", epochs=(100.0, 100.0), share=None, others=200.0)
    assert "about 2.6 min." in estimates.expect_like_baseline(loaded, load=QUIET)


def test_a_neighbour_is_watched_from_its_first_busy_sample_on(monkeypatch):
    """A neighbour sharing a core at about half of it crossed the busy mark in every other
    sample, and was said to run 283 s of a 707 s run: once busy it is watched to the end."""
    from workbook.runner import contention

    class Neighbour:
        pid = 4242

        def __init__(self, percents):
            self.percents = iter(percents)

        def cpu_percent(self, interval):
            return next(self.percents)

        def cmdline(self):
            return ["sh", "-c", "while :; do :; done"]

        def name(self):
            return "sh"

    neighbour = Neighbour([0, 60, 40, 60, 40, 0])  # the first call only starts psutil's count
    monkeypatch.setattr(contention.psutil, "process_iter", lambda: [neighbour])
    monitor = ContentionMonitor(cores=2, interval=1.0)
    for second in range(6):
        monitor.sample(float(second), set())
    (watched,) = monitor.busy.values()
    assert watched.busy_seconds == pytest.approx(5.0)  # every second after the first sample
    assert watched.mean_share == pytest.approx((0.6 + 0.4 + 0.6 + 0.4 + 0.0) / 5)
    assert "used 40% of a core for 5 s of the run's 5 s" in contention.describe_busy(watched, 5.0)
