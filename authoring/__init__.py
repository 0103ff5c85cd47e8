"""Authoring tools: the files the repository generates from its sources of truth.

    chain       solutions/source/fashion_mnist.steps.py -> the step scripts in solutions/
    variants    the solution + a patch in solutions/source/ -> the elastic script in bonus/
    learners    a reference + a deviation -> each script of tests/grader_cases/learners
    patches     applying a unified diff, found by its text: for variants and learners
    notebooks   notebooks/src/*.md -> notebooks/*.ipynb (with the chain's diffs and TODOs)
    generated   what chain and notebooks share: write only what changed, list what is stale, one CLI
    sample      data/sample, the committed sample of the official data (python -m authoring.sample)

    python -m authoring build    # regenerate everything that changed (chain first, then notebooks)
    python -m authoring check    # exit 1 and name what is stale

For authors and CI only: notebook kernels, the grader and the instructor's course never import
this package.
"""
