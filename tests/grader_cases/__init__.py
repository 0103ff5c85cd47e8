"""Test data for the step checker (grader/)."""
