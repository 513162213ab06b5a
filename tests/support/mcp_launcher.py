"""A launcher like `npm exec` or `uvx` for the tests that MCP servers start in the background and
leave nothing behind (tests/unit/test_mcp_start.py): it starts the command after `--` as its child
(in its own process group, with its stdin and stdout) and waits for it, forwarding no signal
(SIGTERM ends the launcher alone, as npm's leaves its child running). It writes
"LAUNCHER_PID CHILD_PID" to the file named first.

Run: python tests/support/mcp_launcher.py PIDS_FILE -- python tests/support/mcp_fixture_server.py
(the fixture's $FIXTURE_START_DELAY makes the child slow to answer its initialize).
"""

import os
import subprocess
import sys

if __name__ == "__main__":
    pids_file, separator, *command = sys.argv[1:]
    assert separator == "--", "usage: mcp_launcher.py PIDS_FILE -- COMMAND..."
    child = subprocess.Popen(command)
    with open(pids_file, "a", encoding="utf-8") as pids:
        pids.write(f"{os.getpid()} {child.pid}\n")
    sys.exit(child.wait())
