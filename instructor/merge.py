"""Copying one student's autograde from a worker's gradebook into the course's.

Autograding runs several nbgrader processes at once over disjoint students (both cores), each
with its own copy of the gradebook, since SQLite and nbgrader expect one writer. Afterwards
each student a worker graded is copied into the course's gradebook through nbgrader's API:
the submission's timestamp, and for every notebook its flag and late penalty, every grade's
scores and every comment.
"""

from __future__ import annotations

import warnings

GRADE_FIELDS = ("auto_score", "manual_score", "extra_credit", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment", "manual_comment")
NOTEBOOK_FIELDS = ("flagged", "late_submission_penalty")


def copy_submission(source, target, assignment: str, student: str) -> None:
    """Makes `student`'s submission of `assignment` in gradebook `target` what it is in
    gradebook `source`."""
    with warnings.catch_warnings():
        # nbgrader's add_submission makes SQLAlchemy warn about its own autoflush (harmless).
        warnings.filterwarnings("ignore", message=".*not in session", module="nbgrader")
        _copy(source, target, assignment, student)


def _copy(source, target, assignment: str, student: str) -> None:
    submitted = source.find_submission(assignment, student)
    person = submitted.student
    target.update_or_create_student(
        student, first_name=person.first_name, last_name=person.last_name, email=person.email
    )
    kwargs = {"timestamp": submitted.timestamp} if submitted.timestamp else {}
    target.update_or_create_submission(assignment, student, **kwargs)
    for notebook in submitted.notebooks:
        copy = target.find_submission_notebook(notebook.name, assignment, student)
        _copy_fields(notebook, copy, NOTEBOOK_FIELDS)
        for grade in notebook.grades:
            _copy_fields(
                grade,
                target.find_grade(grade.name, notebook.name, assignment, student),
                GRADE_FIELDS,
            )
        for comment in notebook.comments:
            _copy_fields(
                comment,
                target.find_comment(comment.name, notebook.name, assignment, student),
                COMMENT_FIELDS,
            )
    target.db.commit()


def _copy_fields(source, target, fields) -> None:
    for name in fields:
        setattr(target, name, getattr(source, name))
