"""The checker's entry: what its callers import, from the layers that do the work.

- grader.source: reading a learner's file safely and parsing it (`read_source`, `parse`,
  `FileProblem`);
- grader.names: `Script`, the names layer: what a name is, where a value flows;
- grader.ranks, grader.scaling, grader.training, grader.schedule: question modules on it;
- grader.rules: one rule per step, returning the verdicts of grader.verdicts (`Failure`,
  `Note`, or None).

Plain `ast` throughout (no TensorFlow, no Horovod), so checking a file takes milliseconds.
"""

from grader.names import Script
from grader.source import MAX_BYTES, FileProblem, decode, parse, read_source
from grader.verdicts import Failure, Note, first_verdict

__all__ = [
    "MAX_BYTES",
    "FileProblem",
    "Failure",
    "Note",
    "Script",
    "decode",
    "first_verdict",
    "parse",
    "read_source",
]
