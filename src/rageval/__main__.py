"""`python -m rageval`: the command line."""

from rageval.cli import run_process

run_process()
