"""Entry point for `python -m ocat`."""

from ocat.cli import main

raise SystemExit(main())
