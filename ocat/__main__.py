"""Entry point for `python -m ocat`."""

from ocat.cli.dispatch import run

run()
