"""`python warm_exec.py ADDRESS PID_FD ARGS...` runs `python ARGS...` from a warm server
(tests/support/warm_server.py), for a test that starts a process by its command line (an MCP
client, `subprocess.Popen`) rather than through `Cli`.

This launcher is a small interpreter of its own that stands for the run: it hands the server
its stdin, stdout and stderr and its environment and folder, passes on the signals a test sends
it (SIGINT, SIGTERM, ...), and ends as the run ended, with its exit code or of its signal. Killed
by SIGKILL, it cannot pass that on: its socket closes, and the server kills the run. PID_FD, when
not "-", is a descriptor the launcher writes the run's own pid to (for a test that must signal
the run itself). Should the server be unreachable, the launcher becomes `python ARGS...`.

Only the standard library's smallest modules are imported, so the launcher starts in a few
hundredths of a second.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _say_pid(pid_fd: str, pid: int) -> None:
    if pid_fd != "-":
        os.write(int(pid_fd), f"{pid}\n".encode())
        os.close(int(pid_fd))


def main(address: str, pid_fd: str, argv: list[str]) -> None:
    """Run `python *argv` from the server at `address` and end as it ended (never returns)."""
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        channel.connect("\0" + address)
    except OSError:
        _say_pid(pid_fd, os.getpid())  # the same pid once this process is the interpreter
        os.execv(sys.executable, [sys.executable, *argv])
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(channel, [request], [0, 1, 2])
    replies = channel.makefile("r")
    pid = json.loads(replies.readline())["pid"]
    for number in FORWARDED:
        signal.signal(number, lambda received, _: os.kill(pid, received))
    _say_pid(pid_fd, pid)
    # Each signal forwarded above interrupts this read, which Python then resumes (PEP 475).
    code = json.loads(replies.readline())["code"]
    if code < 0:  # the run died of a signal: so does its stand-in
        if -code != signal.SIGKILL:  # the one whose handler cannot be set (nor need be)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
