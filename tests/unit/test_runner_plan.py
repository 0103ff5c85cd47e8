"""The notebook runner's plan (workbook/runner/): the layout of workers and threads, the
command line split against horovodrun's own parser, the options of a run, and which hosts are
remote and how horovodrun reaches them.
"""

import argparse
import os
import shutil
import socket
import sys
from pathlib import Path

import psutil
import pytest

from workbook import runner
from workbook.runner import (
    auto_layout,
    horovodrun_cli,
    hosts,
    parse_magic_line,
    plan_run,
    split_horovodrun_args,
)
from workbook.runner.command import HOROVODRUN

VENV_BIN = Path(sys.executable).parent

needs_horovodrun = pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cores, gpus, workers, threads, text",
    [
        (1, 0, 1, 1, "1 worker x 1 thread on 1 CPU core"),
        (2, 0, 2, 1, "2 workers x 1 thread on 2 CPU cores"),
        (8, 0, 2, 4, "2 workers x 4 threads on 8 CPU cores"),
        (16, 4, 4, 4, "4 workers x 4 threads on 16 CPU cores, one GPU each (4 GPUs visible)"),
        (2, 4, 4, 1, "4 workers x 1 thread on 2 CPU cores, one GPU each (4 GPUs visible)"),
        (16, 2, 2, 8, "2 workers x 8 threads on 16 CPU cores, one GPU each (2 GPUs visible)"),
    ],
)
def test_auto_layout(cores, gpus, workers, threads, text):
    layout = auto_layout(cores=cores, gpus=gpus)
    assert (layout.workers, layout.threads) == (workers, threads)
    assert layout.workers * layout.threads <= max(cores, layout.workers)
    assert layout.describe() == text
    assert layout.env() == {
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": "1",
    }


ONE_GPU_HIDDEN = (
    'on the CPU, the 1 GPU hidden (CUDA_VISIBLE_DEVICES=""): the lesson\'s '
    "gpus[hvd.local_rank()] needs a GPU per worker, and with 2 workers on 1 GPU local rank 1 "
    "would find none (IndexError)"
)


def plan_layout(np, gpus, share=None, cores=16):
    return runner.layout.choose_layout(
        np,
        share=share,
        launcher="horovodrun",
        cores=cores,
        gpus=gpus,
        hosts=None,
        remote=None,
        launch_options=[],
    )


@pytest.mark.parametrize(
    "np, share, gpus, text",
    [
        # One GPU: np="auto" compares 2 CPU workers, its reference is on the CPU too, and the
        # GPU gets a run of its own (np=1).
        (
            "auto",
            None,
            1,
            f"2 workers x 8 threads on 16 CPU cores, each pinned to 8 cores of its own; "
            f"{ONE_GPU_HIDDEN}",
        ),
        (
            1,
            "auto",
            1,
            "1 worker x 8 threads pinned to 8 of 16 CPU cores; on the CPU, the 1 GPU hidden "
            '(CUDA_VISIBLE_DEVICES=""), like the CPU workers of np="auto" it is the reference for '
            '(with 1 GPU, np="auto" runs 2 workers on the CPU)',
        ),
        (1, None, 1, "1 worker x 16 threads on 16 CPU cores, on one GPU (1 GPU visible)"),
        (2, None, 1, f"2 workers x 8 threads on 16 CPU cores; {ONE_GPU_HIDDEN}"),
        (
            4,
            None,
            2,
            "4 workers x 4 threads on 16 CPU cores; on the CPU, the 2 GPUs hidden "
            '(CUDA_VISIBLE_DEVICES=""): the lesson\'s gpus[hvd.local_rank()] needs a GPU per '
            "worker, and with 4 workers on 2 GPUs local rank 2 would find none (IndexError)",
        ),
        (2, None, 4, "2 workers x 8 threads on 16 CPU cores, one GPU each (4 GPUs visible)"),
        (1, "auto", 4, "1 worker x 4 threads on 16 CPU cores, on one GPU (4 GPUs visible)"),
    ],
)
def test_no_worker_is_left_without_the_gpu_its_pinning_takes(np, share, gpus, text):
    layout = plan_layout(np, gpus, share)
    assert layout.describe() == text
    on_gpus = "one GPU each" in text or "on one GPU" in text
    assert (layout.env().get("CUDA_VISIBLE_DEVICES") == "") == (not on_gpus)
    assert layout.gpus >= layout.workers if on_gpus else layout.gpus == 0
    assert layout.pinned == ("pinned" in text)


@needs_horovodrun
def test_a_cpu_layout_hides_gpus_whatever_cuda_visible_devices_said(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    common = dict(cwd=tmp_path, logs_root=tmp_path / "logs", cores=2)
    assert plan_run("train.py", np=2, gpus=1, **common).env["CUDA_VISIBLE_DEVICES"] == ""
    assert plan_run("train.py", np=1, gpus=1, **common).env["CUDA_VISIBLE_DEVICES"] == "0"
    # A run's own env= still wins: a learner who sets it means it.
    given = plan_run("train.py", np=2, gpus=1, env={"CUDA_VISIBLE_DEVICES": "0"}, **common)
    assert given.env["CUDA_VISIBLE_DEVICES"] == "0"


def test_the_package_never_imports_the_module_it_runs_with_python_m():
    # `python -m workbook.runner.launcher` after the package imported it: runpy's
    # RuntimeWarning "found in sys.modules" at the start of every run.
    import workbook.runner  # noqa: F401

    assert "workbook.runner.launcher" not in sys.modules
    assert HOROVODRUN[1:] == ("-m", "workbook.runner.launcher")


def test_more_workers_than_cores_is_said():
    assert runner.explicit_layout(4, cores=2, gpus=0).describe() == (
        "4 workers x 1 thread on 2 CPU cores (more workers than cores: they take turns)"
    )


def test_remote_hosts_keep_tensorflows_thread_default():
    layout = runner.explicit_layout(8, cores=2, gpus=0, hosts="host1:4,host2:4")
    assert layout.env() == {}
    assert layout.describe() == "8 workers on hosts host1:4,host2:4"


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


@needs_horovodrun
def test_options_come_from_horovodruns_own_parser():
    from horovod.runner import launch

    parser = horovodrun_cli.horovodrun_parser()
    assert launch.argparse is argparse  # the substitute was only there while the parser was built
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.parse_args(["-np", "2", "--verbose", "x.py"]).verbose is True
    # Options horovodrun knows are known here, with the number of values they take.
    flags, pairs = horovodrun_cli.options_by_count()
    assert {"--verbose", "--gloo", "--mpi", "--tcp", "-cb", "--disable-cache", "-h"} <= flags
    assert {"-np", "-H", "--fusion-threshold-mb", "--start-timeout"}.isdisjoint(flags)
    assert pairs == {"--blacklist-cooldown-range"}
    for action in parser._actions:
        if action.option_strings and action.nargs not in (0, 2):
            # The split gives every other option one value: check that holds in this Horovod.
            assert action.nargs in (None, 1), action.option_strings

    for line in [
        "-np 2 -H localhost:2 python train.py --epochs 3",
        "--gloo --verbose -np 4 --hostfile hosts.txt --fusion-threshold-mb 32 train.py -np 9",
        "--blacklist-cooldown-range 10 100 -np=2 --start-timeout 60 train.py --lr 0.1",
        "-np 2 --tcp --log-level INFO --no-stall-check train.py",
        "-np 2 --no-hierarchical-allreduce --log-hide-timestamp train.py --verbose",
    ]:
        tokens = line.split()
        options, command = split_horovodrun_args(tokens)
        assert options + command == tokens
        assert command == parser.parse_args(tokens).command, line


def test_magic_line_parsing():
    args = parse_magic_line("-np auto fashion_mnist.py --epochs 3")
    assert (args.np, args.timeout, args.run_name) == ("auto", None, None)
    assert args.command == ["fashion_mnist.py", "--epochs", "3"]

    args = parse_magic_line(
        "--timeout 600 --name wide -np 8 -H host1:4,host2:4 --verbose fashion_mnist.py "
        "--epochs 3 -np 5 --name x"
    )
    assert (args.np, args.timeout, args.run_name) == ("8", 600.0, "wide")
    # horovodrun's options pass through; the script's own arguments are left alone.
    assert args.command == [
        "-H",
        "host1:4,host2:4",
        "--verbose",
        "fashion_mnist.py",
        "--epochs",
        "3",
        "-np",
        "5",
        "--name",
        "x",
    ]

    args = parse_magic_line("--hostfile hosts.txt 'my script.py' --depth 10")
    assert args.np == "auto" and args.command == [
        "--hostfile",
        "hosts.txt",
        "my script.py",
        "--depth",
        "10",
    ]
    with pytest.raises(ValueError):
        parse_magic_line("-np 2")


def a_script(tmp_path, name="train.py", takes_log_dir=True):
    path = tmp_path / name
    path.write_text("import argparse  # --log-dir\n" if takes_log_dir else "print('hi')\n")
    return path


@needs_horovodrun
def test_plan_for_auto_on_two_cores(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    script = a_script(tmp_path)
    plan = plan_run(
        "train.py --epochs 3",
        np="auto",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        run_name="base",
        cores=2,
        gpus=0,
    )
    # Each worker pinned to its own core, by the launcher, before the script starts.
    pin = [str(runner.command.PIN_LAUNCHER), "1"]
    assert plan.argv[len(HOROVODRUN) :] == [
        "--gloo",
        "-np",
        "2",
        sys.executable,
        *pin,
        str(script),
        "--epochs",
        "3",
        "--log-dir",
        str(tmp_path / "logs/base"),
    ]
    assert tuple(plan.argv[: len(HOROVODRUN)]) == HOROVODRUN  # horovodrun, its check answered
    assert plan.display_command == (
        f"horovodrun --gloo -np 2 python {pin[0]} 1 train.py --epochs 3 --log-dir logs/base"
    )
    assert plan.env["TF_NUM_INTRAOP_THREADS"] == "1"
    assert plan.env["TF_NUM_INTEROP_THREADS"] == "1"
    assert plan.env["PATH"].split(os.pathsep)[0] == str(VENV_BIN)
    assert (plan.np, plan.hosts) == (2, "localhost:2")
    assert plan.log_path == tmp_path / "logs" / "base" / "horovodrun.log"


@needs_horovodrun
def test_plan_passes_explicit_options_through(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    a_script(tmp_path)
    # One options object for every plan below (np="auto": -np and the hosts decide).
    options = runner.RunOptions(
        np="auto", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0
    )
    plan = plan_run("-np 3 --mpi -H host1:2,host2:2 train.py --log-dir elsewhere", options=options)
    assert plan.argv[len(HOROVODRUN) :][:5] == ["-np", "3", "--mpi", "-H", "host1:2,host2:2"]
    assert "--gloo" not in plan.argv
    assert plan.argv.count("--log-dir") == 1 and plan.argv[-1] == "elsewhere"
    assert plan.run_dir == tmp_path / "elsewhere"
    assert (plan.np, plan.hosts) == (3, "host1:2,host2:2")
    assert "TF_NUM_INTRAOP_THREADS" not in plan.env  # remote hosts: their cores are unknown

    plan = plan_run("-H host1:4,host2:4 train.py", options=options)
    assert plan.np == 8 and plan.run_name.startswith("train-np8-")

    (tmp_path / "hosts.txt").write_text("host1 slots=2\nhost2 slots=4\n")
    plan = plan_run(["--hostfile", "hosts.txt", "train.py"], options=options)
    assert (plan.np, plan.hosts) == (6, "host1:2,host2:4")
    # horovodrun 0.28.1 reads a hostfile with horovod.runner.common.util.hosts.parse_host_files,
    # which fails with an IndexError on a comment or an empty line: refused here, with the rule.
    (tmp_path / "hosts.txt").write_text("# two machines\nhost1 slots=2\nhost2 slots=4\n")
    with pytest.raises(ValueError, match=r"reads every line as `host slots=N`"):
        plan_run(["--hostfile", "hosts.txt", "train.py"], cwd=tmp_path, cores=2, gpus=0)


@pytest.mark.parametrize(
    "args",
    [
        "--log-dir first --log-dir second",
        "--log-dir=first --log-dir=second",
        "--log-dir first --log-dir=second",
        "--log-dir=first --epochs 2 --log-dir second",
    ],
)
def test_plan_takes_the_last_log_dir_like_argparse(tmp_path, args):
    a_script(tmp_path)
    plan = plan_run(
        f"train.py {args}",
        np=1,
        launcher="python",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        cores=2,
        gpus=0,
    )
    assert plan.tensorboard_dir == tmp_path / "second"
    assert plan.run_dir == tmp_path / "second"
    assert plan.argv[2:] == args.split()  # the script's own --log-dir: none is added


@needs_horovodrun
def test_plan_leaves_scripts_without_log_dir_alone(tmp_path):
    a_script(tmp_path, takes_log_dir=False)
    plan = plan_run("train.py", np=2, cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    assert "--log-dir" not in plan.argv and plan.tensorboard_dir is None
    assert plan.run_dir.parent == tmp_path / "logs"  # the raw log still has its place
    # Default names never collide: a reused one would resume from the old checkpoints.
    plan.run_dir.mkdir(parents=True)
    again = plan_run("train.py", np=2, cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    assert again.run_name == plan.run_name + "-2"
    with pytest.raises(FileNotFoundError):
        plan_run("missing.py", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)


@needs_horovodrun
def test_one_options_object_carries_a_run(tmp_path):
    a_script(tmp_path)
    options = runner.RunOptions(
        np=2,
        run_name="same",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        cores=2,
        gpus=0,
        share=1,
        env={"X": "1"},
    )
    with pytest.raises(AttributeError):
        options.np = 3  # built once, handed down unchanged
    plan = plan_run("train.py", options=options)
    as_keywords = plan_run(
        "train.py",
        2,
        run_name="same",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        cores=2,
        gpus=0,
        share=1,
        env={"X": "1"},
    )
    assert (plan.argv, plan.layout, plan.run_dir) == (
        as_keywords.argv,
        as_keywords.layout,
        as_keywords.run_dir,
    )
    assert plan.layout.pinned and plan.env["X"] == "1" and plan.np == 2
    # Keywords beside the options replace those fields; a -np in the command wins over both.
    one = plan_run("train.py", options=options, np=1, run_name="one")
    assert (one.np, one.run_name, one.layout.threads) == (1, "one", 1)
    assert plan_run("-np 1 train.py", options=options).np == 1
    with pytest.raises(TypeError, match="workers"):
        plan_run("train.py", options=options, workers=2)


@needs_horovodrun
def test_plan_refuses_fewer_workers_than_the_slots_of_H_with_gloo(tmp_path):
    a_script(tmp_path)
    common = dict(cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    # horovodrun 0.28.1 with Gloo would start 2 workers here (test_gloo_starts_every_slot_of_H).
    with pytest.raises(ValueError) as raised:
        plan_run("-np 1 -H localhost:2 train.py", **common)
    assert str(raised.value) == (
        "-np 1 with -H localhost:2 would start 2 workers: horovodrun 0.28.1 (Gloo) starts one "
        "on every slot of -H, whatever -np says. Give -H only the slots to use: "
        "-np 1 -H localhost:1"
    )
    with pytest.raises(ValueError, match=r"Give -H only the slots to use: -np 5 -H a:2,b:3$"):
        plan_run("-np 5 -H a:2,b:4 train.py", **common)
    with pytest.raises(ValueError, match=r"^-np 3 asks for more workers than the 2 slots of -H"):
        plan_run("-np 3 -H localhost:2 train.py", **common)
    # mpirun starts -np workers; `auto` and an -np equal to the slots are what -H says.
    assert plan_run("--mpi -np 1 -H localhost:2 train.py", **common).np == 1
    assert plan_run("-H localhost:2 train.py", **common).np == 2
    assert plan_run("-np 2 -H localhost:2 train.py", **common).np == 2


@needs_horovodrun
def test_this_machines_own_address_is_this_machine_everywhere(tmp_path, monkeypatch):
    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)
    lan = [a for a in hosts.local_addresses() if not a.startswith("127.")]
    if not lan:
        pytest.skip("this machine has no address but loopback")
    a_script(tmp_path)
    plan = plan_run(
        f"-H {lan[0]}:2 train.py", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0
    )
    # Local for the layout (threads split), the start-up bound, the ssh check and the clean-up.
    assert plan.layout.describe() == "2 workers x 1 thread on 2 CPU cores"
    assert "--start-timeout" not in plan.argv and plan.remote_hosts == ()


def test_every_process_of_a_run_gets_the_safe_env_and_a_marker_of_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("HWLOC_COMPONENTS", raising=False)
    a_script(tmp_path)
    common = dict(launcher="python", np=1, cwd=tmp_path, logs_root=tmp_path / "logs")
    first, second = plan_run("train.py", **common), plan_run("train.py", **common)
    assert first.env["HWLOC_COMPONENTS"] == "-gl"
    assert first.marker[0] == "WORKBOOK_RUN_ID" and first.marker != second.marker
    own = plan_run("train.py", env={"HWLOC_COMPONENTS": "-gl,-opencl"}, **common)
    assert own.env["HWLOC_COMPONENTS"] == "-gl,-opencl"  # the caller's own value wins


# ---------------------------------------------------------------------------------------------
# Hosts: which ones horovodrun reaches with ssh, and the check before a run (real ssh, no server)
# ---------------------------------------------------------------------------------------------


def test_ssh_settings_come_from_horovodruns_options():
    options, command = split_horovodrun_args("-np 4 -p 2222 -i /k/id -H a:2,b:2 x.py -p 9".split())
    assert command == ["x.py", "-p", "9"]  # the script's own -p is the script's
    assert runner.command.ssh_settings(options) == hosts.SshSettings(
        port="2222", identity_file="/k/id"
    )
    long = runner.command.ssh_settings(["--ssh-port=22", "--ssh-identity-file", "key"])
    assert long.args() == ["-p", "22", "-i", "key"]
    assert runner.command.ssh_settings(["-H", "a:1"]).args() == []
    assert hosts.ssh_command("a", long)[-6:] == ["-p", "22", "-i", "key", "a", "true"]
    plain = hosts.ssh_command("a")
    assert "BatchMode=yes" in plain and "ConnectTimeout=5" in plain


@needs_horovodrun
def test_host_strings_are_read_as_horovodrun_reads_them():
    assert hosts.host_entries("a:2,b:2,a:1, c:3") == [("a", 2), ("b", 2), ("a", 1), ("c", 3)]
    assert hosts.host_names("a:2,b:2,a:1, c:3") == ["a", "b", "c"]
    assert hosts.slots_of_hosts("a:2,b:2,a:1, c:3") == 8
    # The first ranks' slots, host by host, as horovodrun's get_host_assignments gives them.
    assert hosts.hosts_for_workers("a:2,b:4", 5) == "a:2,b:3"
    assert hosts.hosts_for_workers("a:2,b:2,a:1", 5) == "a:2,b:2,a:1"
    assert hosts.hosts_for_workers("localhost:4", 1) == "localhost:1"
    # horovodrun 0.28.1 refuses a host without its slots (parse_hosts_and_slots), and so does
    # the runner, before anything starts.
    for value in ["a:2,c", "a", "a:2,,b:1", "a:two"]:
        with pytest.raises(ValueError, match=r"takes the hosts as name:slots"):
            hosts.host_entries(value)
        with pytest.raises(ValueError, match=r"takes the hosts as name:slots"):
            hosts.slots_of_hosts(value)


@needs_horovodrun
def test_which_hosts_are_remote():
    this_machine = [
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET and not address.address.startswith("127.")
    ]
    local = ["localhost", "127.0.0.1", socket.gethostname(), *this_machine]
    given = ",".join(f"{name}:1" for name in [*local, "elsewhere.invalid", "10.254.253.252"])
    # horovodrun's rule: a name that resolves to an address of this machine is local; one that
    # does not resolve is remote (ssh may know it from its config).
    assert hosts.remote_hosts(given) == ["elsewhere.invalid", "10.254.253.252"]


@needs_horovodrun
def test_plan_bounds_the_start_on_remote_hosts(tmp_path, monkeypatch):
    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)
    a_script(tmp_path)
    common = dict(cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    plan = plan_run("-H host1:2,host2:2 -p 2222 train.py", **common)
    assert plan.argv[plan.argv.index("--start-timeout") + 1] == "60"
    assert "--start-timeout 60" in plan.display_command
    assert plan.ssh == hosts.SshSettings(port="2222")
    given = plan_run("-H host1:2,host2:2 --start-timeout 120 train.py", **common)
    assert given.argv.count("--start-timeout") == 1 and "120" in given.argv
    from_env = plan_run("-H host1:2 train.py", env={"HOROVOD_START_TIMEOUT": "90"}, **common)
    assert "--start-timeout" not in from_env.argv
    local = plan_run("-H localhost:2 train.py", **common)
    assert "--start-timeout" not in local.argv and local.ssh == hosts.SshSettings()
