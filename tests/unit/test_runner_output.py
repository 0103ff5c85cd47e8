"""The notebook runner's output parsing (workbook/runner/output.py and transcript), on output
captured from real horovodrun 0.28.1 runs (tests/runner_outputs.py): progress redraws, ranks'
prefixes, chunks cut anywhere, warnings folded, a failing rank's traceback, the result line.
"""

import random
import textwrap
from pathlib import Path

import pytest

import runner_outputs
from runner_outputs import (
    BS,
    FAILURE_OUTPUT,
    MPI_OUTPUT,
    SOLUTION_OUTPUT,
    STARTER_OUTPUT,
    STARTER_PIECES,
    TFA_NOTICE,
    finished_bars,
    parse_in_pieces,
    transcript_of,
)
from workbook import runner
from workbook.runner import Line, OutputParser, Progress, Transcript, rank_error

# ---------------------------------------------------------------------------------------------
# Output parsing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_progress_redraws_become_progress_events(size):
    events = parse_in_pieces(SOLUTION_OUTPUT, size)
    progress = [e for e in events if isinstance(e, Progress)]
    assert [e.text.split(" [")[0] for e in progress] == ["1/4", "2/4", "3/4", "1/4", "2/4"]
    assert all(e.rank == 0 and "\b" not in e.text and "\r" not in e.text for e in progress)
    lines = [e for e in events if isinstance(e, Line)]
    assert Line(0, "stdout", "Epoch 1/2") in lines
    assert (
        Line(
            1,
            "stderr",
            "WARNING:tensorflow:Callback method `on_train_batch_end` is slow "
            "compared to the batch time (batch time: 0.1243s vs `on_train_batch_end` time: "
            "0.1850s).",
        )
        in lines
    )
    assert lines[0].rank is None  # horovodrun's own output has no prefix


def test_transcript_of_the_solution():
    transcript = transcript_of(SOLUTION_OUTPUT)
    shown = "\n".join(transcript.shown)
    assert "[rank 0] Epoch 1/2" in transcript.shown
    assert "[rank 0] Epoch 1: finished gradual learning rate warmup to 0.025." in transcript.shown
    assert "[rank 0] Throughput: 443 images/s, 13.2 s per epoch" in transcript.shown
    # Of ~10 progress redraws only each epoch's finished bar is a line, none with a backspace;
    # the 4/4 bar with an ETA that the warmup callback's print ended is a redraw too.
    bars = finished_bars(transcript)
    assert [bar.split(" - ")[1] for bar in bars] == ["26s 511ms/step", "1s 237ms/step"]
    assert "\b" not in shown and "\r" not in shown
    # TensorFlow's C++ logging is kept aside, prefixed or not, and so are the known warnings.
    assert "tensorflow/core" not in shown and "To enable" not in shown
    assert "UserWarning" not in shown and "saving_api" not in shown and "is slow" not in shown
    assert len(transcript.hidden_logs) == 5 + 2 + 1
    assert transcript.metrics()["test_accuracy"] == 0.1406
    assert transcript.metrics()["images_per_second"] == 443.1
    assert transcript.failed_rank() is None


def test_mpiruns_chunks_are_put_back_together():
    transcript = transcript_of(MPI_OUTPUT)
    assert transcript.shown == [
        "[rank 0] Epoch 1/2",
        "[rank 0] Epoch 1: finished gradual learning rate warmup to 0.025.",
        "[rank 0] 4/4 [==============================] - 62s 923ms/step - loss: 2.4971 - "
        "accuracy: 0.1094 - val_loss: 2.7094 - val_accuracy: 0.1250 - lr: 0.0250",
        "[rank 0] Epoch 2/2",
        "[rank 0] 4/4 [==============================] - 1s 421ms/step - loss: 2.1931 - "
        "accuracy: 0.2344 - val_loss: 2.5645 - val_accuracy: 0.2018",
        "[rank 0] Throughput: 408 images/s, 31.3 s per epoch",
        "[rank 0] Test loss: 2.5277, test accuracy: 0.2031",
        "[rank 0] worker 0 of 2",
        '[rank 0] RESULT {"test_loss": 2.5277, "test_accuracy": 0.2031, "epochs": 2}',
    ]
    assert transcript.metrics()["test_accuracy"] == 0.2031
    assert [line.split("]", 1)[0] for line in transcript.hidden_logs] == ["[rank 0"] * 2 + [
        "[rank 1"
    ]


def split_everywhere(data, default_rank=None):
    """The events of `data` cut in two at every byte, each cut fed as two pieces."""
    for cut in range(1, len(data)):
        parser = OutputParser(default_rank=default_rank)
        yield cut, parser.feed(data[:cut]) + parser.feed(data[cut:]) + parser.finish()


@pytest.mark.parametrize(
    "name", ["SOLUTION_OUTPUT", "MPI_OUTPUT", "STARTER_OUTPUT", "FAILURE_OUTPUT"]
)
def test_events_do_not_depend_on_where_the_output_is_cut(name):
    data = getattr(runner_outputs, name)
    whole = parse_in_pieces(data, len(data))
    for cut, events in split_everywhere(data):
        assert events == whole, f"cut at byte {cut}: {data[max(0, cut - 30) : cut + 30]!r}"
    assert parse_in_pieces(data, 1) == whole
    # And into many pieces at random places, with multi-byte characters cut too.
    text = data.replace(b"Epoch", "Époque ✓".encode())
    whole = parse_in_pieces(text, len(text))
    rng = random.Random(7)
    for _ in range(200):
        parser, at, events = OutputParser(), 0, []
        while at < len(text):
            size = rng.choice([1, 2, 3, 13, 80, 1000])
            events += parser.feed(text[at : at + size])
            at += size
        assert events + parser.finish() == whole


def test_known_warnings_and_empty_lines_are_folded():
    lines = [
        *(f"[{rank}]<stderr>:{line}\n" for rank in (0, 1) for line in TFA_NOTICE),
        "[0]<stdout>:\n",
        "[1]<stdout>:Epoch 1/1\n",
        "[1]<stderr>:\n",
        "[0]<stderr>:UserWarning: something else\n",
        "[1]<stderr>:UserWarning: something else\n",
    ]
    transcript = transcript_of("".join(lines).encode())
    assert transcript.shown == ["[rank 1] Epoch 1/1", "[rank 0] UserWarning: something else"]
    assert len(transcript.hidden_logs) == 2 * len(TFA_NOTICE) + 2
    # The same unknown warning on another rank: shown once, counted.
    assert transcript.collapsed == 1
    # A notice whose end never comes is hidden for a few lines only.
    cut_short = "".join(f"[0]<stderr>:{line}\n" for line in TFA_NOTICE[:3] + ["x"] * 20)
    assert len(transcript_of(cut_short.encode()).shown) == 23 - runner.output.NOISE_MAX_LINES


def test_transcript_of_two_ranks_printing_everything():
    transcript = transcript_of(STARTER_OUTPUT)
    # rank 0's progress bar is the one on the status line; rank 1's redraws are not lines.
    events = parse_in_pieces(b"".join(STARTER_PIECES[:6]), 4096)
    partial = Transcript()
    for event in events:
        partial.add(event)
    assert set(partial.progress) == {0, 1}
    assert partial.current_progress().startswith("[rank 0] 1/4 [")
    assert not any("ETA" in line for line in transcript.shown)
    # Keras' HDF5 notice on both ranks is a known one: hidden, 2 lines each.
    assert not any("UserWarning" in line for line in transcript.shown)
    assert len(transcript.hidden_logs) == 4
    # stdout (a table row) is shown per rank, even when equal.
    assert "[rank 0] Trouser          0.000   0.000" in transcript.shown
    assert "[rank 1] Trouser          0.000   0.000" in transcript.shown
    # Both ranks print RESULT; rank 0's is the run's.
    assert set(transcript.results) == {0, 1}
    assert transcript.metrics()["test_accuracy"] == 0.0938


def test_transcript_of_a_failure():
    transcript = transcript_of(FAILURE_OUTPUT)
    assert transcript.failed_rank() == 1
    assert transcript.exits == [(1, 1), (0, 143)]
    error = rank_error(transcript.by_rank[1])
    assert error.startswith("Traceback (most recent call last):")
    assert error.endswith("RuntimeError: rank 1 fails on purpose")
    # horovodrun's own traceback after the failure is a consequence: kept out of sight.
    assert not any("Horovod detected" in line for line in transcript.shown)
    assert "[horovodrun] Process 1 exit with status code 1." in transcript.shown


def test_rank_error_keeps_chained_tracebacks_and_falls_back_to_last_lines():
    lines = textwrap.dedent("""\
        Epoch 1/2
        Traceback (most recent call last):
          File "a.py", line 1, in <module>
        KeyError: 'x'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "a.py", line 3, in <module>
        ValueError: bad
        Terminated""").splitlines()
    error = rank_error(lines)
    assert error.splitlines()[1] == '  File "a.py", line 1, in <module>'
    assert error.endswith("ValueError: bad")
    assert rank_error(["Epoch 1/2", "No prepared data in /x: run prepare"]) == (
        "Epoch 1/2\nNo prepared data in /x: run prepare"
    )
    assert runner.exit_code_meaning(143) == "143: killed by SIGTERM"
    assert runner.exit_code_meaning(137) == "137: killed by SIGKILL (out of memory?)"
    assert runner.exit_code_meaning(1) == "1"


def test_plain_python_output_is_rank_0_without_prefixes():
    data = (
        b"Epoch 1/2\n\r1/4 [==>...] - loss: 2.4" + BS + b"\r4/4 [=====] - loss: 2.3\n"
        b'RESULT {"test_accuracy": 0.5}\n'
    )
    transcript = Transcript(label_ranks=False)
    for event in parse_in_pieces(data, 3, default_rank=0):
        transcript.add(event)
    assert transcript.shown == [
        "Epoch 1/2",
        "4/4 [=====] - loss: 2.3",
        'RESULT {"test_accuracy": 0.5}',
    ]
    assert transcript.metrics() == {"test_accuracy": 0.5}


def test_result_summary():
    result = runner.RunResult(
        exit_code=1,
        wall_seconds=8.5,
        np=2,
        hosts="localhost:2",
        metrics={},
        failed_rank=1,
        error="Traceback (most recent call last):\nRuntimeError: <boom>",
        log_path=Path("x.log"),
        run_name="r",
        layout="2 workers x 1 thread on 2 CPU cores",
    )
    assert not result.ok and result.images_per_second is None
    assert "FAILED (rank 1, exit code 1)" in str(result)
    assert "RuntimeError: &lt;boom&gt;" in result._repr_html_()
    ok = runner.RunResult(
        0,
        40.0,
        2,
        "localhost:2",
        {"test_accuracy": 0.9, "images_per_second": 512.3},
        None,
        "",
        Path("x.log"),
    )
    assert ok.ok and ok.test_accuracy == 0.9 and ok.images_per_second == 512.3
    assert "512" in ok._repr_html_() and "finished in 40.0 s" in str(ok)
    # A busy neighbour's command is code in the notebook, not text between literal backticks.
    ok.busy_others = ["`python x.py --fast` (pid 7) used 90% of a core for 30 s of the run's 40 s"]
    shown = ok._repr_html_()
    assert "<code>python x.py --fast</code> (pid 7)" in shown and "`" not in shown


def test_magic_is_registered():
    registered = {}

    class FakeShell:
        def register_magic_function(self, function, magic_kind, magic_name):
            registered[magic_name] = (function, magic_kind)

    runner.load_ipython_extension(FakeShell())
    assert registered["horovodrun"] == (runner.horovodrun_magic, "line")
