"""The bonus check (grader/bonus/): AlexNet in the model registry, read statically.

Plain `ast` on edits of the generated bonus reference (solutions/bonus/fashion_mnist_alexnet.py):
wrong versions fail with their own message, unusual but right ones pass, and the step checks
don't notice the bonus. Its command line: tests/smoke/test_grader_cli.py; `train_bonus` on 2
real workers: tests/system/test_bonus_training.py.
"""

from dataclasses import dataclass

import pytest

from authoring import chain as step_chain
from grader import check_all, check_bonus

SOLUTIONS = step_chain.OUTPUT_DIR
REFERENCE = SOLUTIONS / step_chain.BONUSES["alexnet"]
SOLUTION = SOLUTIONS / "fashion_mnist_solution.py"
REFERENCE_TEXT = REFERENCE.read_text(encoding="utf-8")

ENTRY = '    "alexnet": alexnet,\n'
CONV_5 = "            conv(128, 3),\n            pool(),\n"
# The output layer of the AlexNet (the WideResNet has the same one, at another indentation).
OUTPUT = '            tf.keras.layers.Dense(classes, activation="softmax", kernel_regularizer=l2),'
SIGNATURE = "def alexnet(args, input_shape=(28, 28, 1), classes=10):"
CHOICES = "choices=sorted(MODELS)"
BUILD = "model = MODELS[args.model](args)"

# A functional-API AlexNet with its own spelling of everything: layers imported from
# tensorflow.keras, the convolutions made in a loop, MaxPool2D, softmax as a layer of its own,
# the number of classes from CLASS_NAMES, a model name with more than the registry name.
FUNCTIONAL = '''

def build_alexnet(options):
    """AlexNet, functional API."""
    from tensorflow.keras import layers

    l2 = tf.keras.regularizers.l2(options.wd)
    inputs = tf.keras.Input(shape=(28, 28, 1))
    x = inputs
    for index, (filters, size) in enumerate([(32, 3), (96, 5), (192, 3), (128, 3), (128, 3)]):
        x = layers.Conv2D(filters, size, padding="same", activation="relu",
                          kernel_regularizer=l2)(x)
        if index in (0, 1, 4):
            x = layers.MaxPool2D(3, 2, padding="same")(x)
    x = layers.Flatten()(x)
    for _ in range(2):
        x = layers.Dropout(0.5)(layers.Dense(512, activation="relu")(x))
    x = layers.Dense(len(CLASS_NAMES))(x)
    outputs = layers.Activation(tf.nn.softmax)(x)
    return tf.keras.Model(inputs, outputs, name="alexnet_28x28")
'''


@dataclass(frozen=True)
class Variant:
    description: str
    edits: tuple  # (old, new) pairs, each old text found exactly once
    expect_pass: bool
    expect_message: str = ""

    def apply(self, text: str) -> str:
        for old, new in self.edits:
            assert text.count(old) == 1, (
                f"{self.description}: {old!r} is in the reference "
                f"{text.count(old)} times, expected once"
            )
            text = text.replace(old, new)
        return text


RIGHT = [
    Variant("the reference", (), True),
    Variant(
        "entry added after the dict",
        (
            (ENTRY, ""),
            ("}\n\n\ndef restart_epoch", '}\nMODELS["alexnet"] = alexnet\n\n\ndef restart_epoch'),
        ),
        True,
    ),
    Variant(
        "registry made with dict()",
        (
            (ENTRY, ""),
            (
                'MODELS = {\n    "wide_resnet": wide_resnet,\n}',
                "MODELS = dict(wide_resnet=wide_resnet, alexnet=alexnet)",
            ),
        ),
        True,
    ),
    Variant(
        "entry added with update()",
        (
            (ENTRY, ""),
            (
                "}\n\n\ndef restart_epoch",
                "}\nMODELS.update(alexnet=alexnet)\n\n\ndef restart_epoch",
            ),
        ),
        True,
    ),
    Variant("entry is a lambda", ((ENTRY, '    "alexnet": lambda args: alexnet(args),\n'),), True),
    Variant(
        "functional API, loops and other spellings",
        (
            (ENTRY, '    "alexnet": build_alexnet,\n'),
            (
                "\n\n# The models --model can pick.",
                FUNCTIONAL + "\n\n# The models --model can pick.",
            ),
        ),
        True,
    ),
    Variant("no choices at all", ((f"{CHOICES}, ", ""),), True),
    Variant(
        "the builder takes **options too",
        (
            (SIGNATURE, "def alexnet(args, **options):"),
            (
                "            tf.keras.Input(shape=input_shape),",
                "            tf.keras.Input((28, 28, 1)),",
            ),
            (OUTPUT, OUTPUT.replace("Dense(classes,", "Dense(10,")),
        ),
        True,
    ),
]

WRONG = [
    Variant("no entry", ((ENTRY, ""),), False, 'MODELS has no "alexnet" entry'),
    Variant(
        "capitalized name",
        ((ENTRY, '    "AlexNet": alexnet,\n'),),
        False,
        'asks for the name "alexnet"',
    ),
    Variant("entry is a call", ((ENTRY, '    "alexnet": alexnet(None),\n'),), False, "a call"),
    Variant(
        "entry names no function",
        ((ENTRY, '    "alexnet": alex_net,\n'),),
        False,
        "defines no function alex_net",
    ),
    Variant(
        "defined after MODELS",
        (
            (SIGNATURE, "def _unused(args, input_shape=(28, 28, 1), classes=10):"),
            (
                "\n\ndef restart_epoch",
                "\n\ndef alexnet(args):\n    return _unused(args)\n\n\ndef restart_epoch",
            ),
        ),
        False,
        "NameError",
    ),
    Variant("four convolutions", ((CONV_5, "            pool(),\n"),), False, "builds 4 Conv2D"),
    Variant(
        "average pooling",
        (("tf.keras.layers.MaxPooling2D(", "tf.keras.layers.AveragePooling2D("),),
        False,
        "average pooling",
    ),
    Variant(
        "no Flatten",
        (("            tf.keras.layers.Flatten(),\n", ""),),
        False,
        "without Flatten()",
    ),
    Variant(
        "no hidden Dense layer",
        (
            ("            dense(512),  # the paper: 4096 units\n", ""),
            ("            dense(512),\n", ""),
        ),
        False,
        "1 Dense layer(s)",
    ),
    Variant(
        "ImageNet's 1000 classes",
        ((OUTPUT, OUTPUT.replace("Dense(classes,", "Dense(1000,")),),
        False,
        "1000 units (ImageNet",
    ),
    Variant(
        "logits, no softmax",
        ((OUTPUT, OUTPUT.replace(' activation="softmax",', "")),),
        False,
        "no softmax",
    ),
    Variant(
        "two required parameters",
        ((SIGNATURE, "def alexnet(args, input_shape, classes=10):"),),
        False,
        "only required argument",
    ),
    Variant(
        "returns nothing",
        (("    return tf.keras.Sequential(\n", "    model = tf.keras.Sequential(\n"),),
        False,
        "returns nothing",
    ),
    Variant("unnamed model", (('        name="alexnet",\n', ""),), False, 'name="alexnet"'),
    Variant("fixed choices", ((CHOICES, 'choices=["wide_resnet"]'),), False, "a fixed list"),
    Variant(
        "registry not used",
        ((BUILD, "model = wide_resnet(args)"),),
        False,
        "never builds its model through the registry",
    ),
    Variant(
        "no registry",
        (
            ("MODELS = {", "REGISTRY = {"),
            (CHOICES, "choices=sorted(REGISTRY)"),
            ("MODELS[args.model]", "REGISTRY[args.model]"),
        ),
        False,
        "no MODELS registry",
    ),
]


def check_text(tmp_path, text):
    path = tmp_path / "fashion_mnist.py"
    path.write_text(text, encoding="utf-8")
    return check_bonus("alexnet", path)


@pytest.mark.parametrize("variant", RIGHT, ids=lambda v: v.description.replace(" ", "_"))
def test_unusual_but_right_versions_pass(tmp_path, variant):
    text = variant.apply(REFERENCE_TEXT)
    compile(text, "fashion_mnist.py", "exec")
    result = check_text(tmp_path, text)
    assert result.passed, result.message
    # The bonus never gets in the way of the steps.
    assert check_all(tmp_path / "fashion_mnist.py").passed


@pytest.mark.parametrize("variant", WRONG, ids=lambda v: v.description.replace(" ", "_"))
def test_wrong_versions_fail_with_their_own_message(tmp_path, variant):
    text = variant.apply(REFERENCE_TEXT)
    compile(text, "fashion_mnist.py", "exec")
    result = check_text(tmp_path, text)
    assert not result.passed
    assert variant.expect_message in result.message, result.message
    assert result.hint and "alexnet" in result.hint
    assert result.expected_diff.startswith("--- solution")


def test_the_solution_has_no_alexnet_yet():
    result = check_bonus("alexnet", SOLUTION)
    assert not result.passed
    assert 'MODELS has no "alexnet" entry (it has "wide_resnet")' in result.message
    assert f"line {result.line}:" in result.message


def test_a_broken_file_is_a_file_problem(tmp_path):
    path = tmp_path / "fashion_mnist.py"
    path.write_text("MODELS = {\n", encoding="utf-8")
    result = check_bonus("alexnet", path)
    assert not result.passed and result.file_problem and "line" in result.message
    assert not check_bonus("alexnet", tmp_path / "missing.py").passed


def test_unknown_bonus_is_a_clear_error():
    with pytest.raises(ValueError, match="bonus must be one of"):
        check_bonus("lenet", SOLUTION)


def test_expected_diff_is_the_reference_bonus_diff():
    diff = check_bonus("alexnet", SOLUTION).expected_diff
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
    assert '    "alexnet": alexnet,' in added
    assert "def alexnet(args, input_shape=(28, 28, 1), classes=10):" in added
    assert not [line for line in diff.splitlines() if line.startswith("-") and line[1:2] != "-"]
