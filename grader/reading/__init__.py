"""The reading check: a script read, never run, each step judged by its rule (see
grader/README.md, "The reading").

In layers, each importing only from the ones before it
(tests/unit/test_imports.py): reading and words (source, syntax, verdicts, budget); the
names layer (names); the question modules, which know Horovod (ranks, scaling, training,
schedule, presets, horovod_*); the rules, one per step (rules/step_NN.py). guard runs every
reading check within its budget; strict compares a whole file with the reference.
"""
