"""The instructor's side: the workbook as an nbgrader course (`python -m instructor ...`).

Modules, one job each:
- course.py      the course folder and nbgrader's Python API on it: init, generate, students,
                 release, collect, zip_collect, feedback, export
- config.py      the nbgrader_config.py that `init` writes, and why each setting
- plugins.py     ExecuteChecksOnly: nbgrader's autograder runs the check cells only, in one kernel
- autograde.py   the class graded in one nbgrader run, failures alone after, no partial grades
- submission.py  what is wrong with one student's files: unusable notebooks, tampered check
                 cells, an unusable fashion_mnist.py, and the commands that recover a submission
- class_report.py  where the class got stuck: per student and step, as CSV, text and
- heatmap.py     ...a heatmap PNG
- __main__.py    the command line

It uses grader (the step checker) and workbook (shared facts, paths); neither imports it.
"""
