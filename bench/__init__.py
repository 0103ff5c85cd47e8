"""Benchmarks of the workbook: commands that measure on this machine and write JSON and PNG.

    python -m bench all                 # everything, full size (about an hour on 2 CPU cores)
    python -m bench scaling             # 1 vs 2 workers: images/s, scaling efficiency, and
                                        # 2 separate processes: the machine's own ceiling
    python -m bench accuracy            # time to 88% and 90% test accuracy, with curves
    python -m bench overhead            # horovodrun -np 1 vs plain python; runner start-up
    python -m bench grading             # checker: one file, a class of 200; nbgrader autograde
    python -m bench all --tiny          # seconds-long settings: checks that they run (make bench-check)
    python -m bench readme              # README.md's benchmark section, from bench/results

Each writes bench/results/<name>.json (machine, settings, every measurement, a summary) and
bench/results/<name>.png; `--out DIR` writes elsewhere. One module per benchmark:

    machine     what the numbers were measured on
    results     statistics, and writing a result file
    processes   a planned run, started, bounded and cleaned up by the runner's execute;
                its first training step
    settings    the script options of each benchmark, full size and tiny
    training    the solution script's runs: settings, RESULT line, TensorBoard scalars
    scaling, accuracy, overhead, grading   the benchmarks
    plots       their pictures
    readme      the README section
"""
