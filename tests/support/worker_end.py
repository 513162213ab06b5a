"""How a pytest-xdist worker ends: at once, once its last report is sent, as an ocat process
ends (ocat/process_end.py).

After a worker's last test, two things kept the run waiting for it (measured on the quick
loop: its last test to the run's end went 7.5 -> 5.1 s):
- pytest's cleanup collects garbage five times to find exceptions raised where nothing could
  catch them (`gc_collect_harder`, ~0.6 s a time on a worker's heap). A worker has sent its
  last report by then, so what it would find is never shown. Each test's own check for them,
  which is what reports them, stays.
- Python's teardown of the two thousand modules a worker imported, ~2.5 s.
"""

from __future__ import annotations

import atexit
import os
import sys

import pytest

try:
    from _pytest.unraisableexception import gc_collect_iterations_key
except ImportError:  # a pytest without it: its cleanup runs as it always did
    gc_collect_iterations_key = None


def end_workers_at_once(config: pytest.Config) -> None:
    """In an xdist worker, skip the garbage hunt after the last report and Python's teardown."""
    # xdist gives a worker's config its `workerinput`. Not PYTEST_XDIST_WORKER: a pytest that a
    # test runs (tests/cli/test_temp_cleanup.py) inherits that from its worker, and must end with
    # its own exit code.
    if not hasattr(config, "workerinput"):
        return  # a run without workers reports what its end finds
    if gc_collect_iterations_key is not None:
        config.stash[gc_collect_iterations_key] = 0
    # Registered now, before the tests import what registers exit handlers of its own: exit
    # handlers run last-registered first, so this one runs after theirs. Threads that are not
    # daemons were joined before any exit handler runs.
    atexit.register(_end_now)


def _end_now() -> None:
    if "logging" in sys.modules:  # its handler was registered before this one: it would be skipped
        import logging

        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
