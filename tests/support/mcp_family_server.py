"""An MCP server with a child of its own, for the tests that no descendant of a server outlives
ocat (tests/unit/test_mcp_descendants.py). It starts one child that sleeps (its pid, and the
server's, are written to $FAMILY_PIDS_FILE), then serves one tool over stdio.

$FAMILY_CHILD: `group` (the child stays in the server's process group, as most servers' do) or
`session` (it makes a session of its own, escaping the group). $FAMILY_ON_EOF: `exit` (the
server ends when its stdin closes, leaving its child behind) or `ignore` (it goes on running).
$FAMILY_STUBBORN=1: the server and its child ignore SIGTERM (only SIGKILL ends them).
"""

import os
import signal
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("family", log_level="WARNING")

CHILD = "import signal, sys, time\nif sys.argv[1] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)"


@server.tool(description="Says hello.")
def hello() -> str:
    return "hello from the family"


def start_child() -> None:
    stubborn = os.environ.get("FAMILY_STUBBORN") == "1"
    child = subprocess.Popen([sys.executable, "-c", CHILD, "1" if stubborn else "0"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=os.environ.get("FAMILY_CHILD") == "session")
    with open(os.environ["FAMILY_PIDS_FILE"], "a", encoding="utf-8") as pids:
        pids.write(f"{os.getpid()} {child.pid}\n")


if __name__ == "__main__":
    if os.environ.get("FAMILY_STUBBORN") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    start_child()
    server.run("stdio")  # returns when stdin closes
    if os.environ.get("FAMILY_ON_EOF") == "ignore":
        time.sleep(600)
