"""Shared pieces of the Horovod workbook: environment set-up, data, preflight, lab launcher."""
