"""The chain's scripts and learners' files as the checker's tests in every tier write them."""

from authoring import chain as step_chain

SOLUTIONS = step_chain.OUTPUT_DIR


def after(step: int):
    """The reference script after `step` of the chain."""
    return SOLUTIONS / step_chain.output_name(step)


def written(tmp_path, text: str, name: str = "fashion_mnist.py"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
