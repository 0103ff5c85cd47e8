"""What the learner's notebook kernels import: everything a learner runs, nothing that judges.

    facts          the facts several packages share (file names, steps, log formats, the
                   environment every process gets, the core count): one home each
    paths          where things live in the repository
    runner/        horovodrun() and %horovodrun: run a script on several workers from a cell
    fashion_data/  the official Fashion-MNIST: its sources, verified, prepared for the scripts
    preflight      can the workbook run here? (`make preflight`)
    lab            `make lab`: JupyterLab and TensorBoard, with a safe environment
    tensorboard    one TensorBoard for every run's logs
    navigation     the "Next" cell: the next notebook in the same tab, this kernel shut down
    cluster        the slurm_and_mpirun bonus: Slurm's host lists as horovodrun's -np and -H
    pipeline_plot  the input_pipeline bonus: the input-pipeline measurements as a plot
    run_times      the run_distributed and where_does_the_time_go notebooks: a run timed from
                   its folder (its record, its epochs)
    verdict_text   the run_distributed notebook: two runs compared fairly, in words
    run_tables     the run_distributed notebook: the runs as tables, plots and a TensorBoard
                   chart
    glance         the run_distributed notebook: the verdict at a glance, the detail folded
    estimates      how long a run will take, from this machine's own pace
    tensorboard_events  the per-epoch scalars of a run's TensorBoard logs, read
    bench_results  the format of `make bench`'s result files
    timeline       the where_does_the_time_go bonus: Horovod's timeline per step and rank, drawn

Imports flow one way: the grader, the instructor's course, the authoring tools and the
benchmarks may import this package; it imports none of them (tests/unit/test_imports.py).
"""
