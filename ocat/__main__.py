"""Entry point for `python -m ocat`."""

from ocat.cli import run

run()
