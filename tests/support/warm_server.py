"""The warm interpreter behind tests/support/warm_start.py, run as a script (never imported).

It imports the libraries that cost an `ocat` process most of its start (chromadb ~2 s, the
embedder's onnxruntime, tokenizers and numpy) once, then waits on the socket it was given
(its number is the script's one argument). Each request brings a JSON line (argv, environment, working folder) and four file
descriptors: the run's stdin, stdout, stderr and a socket of its own. For each, it forks a
waiter, which forks the run: the run puts the descriptors in place of 0, 1 and 2, takes the
environment, the folder and argv, and executes `ocat` as `python -m ocat` would; the waiter
reports the run's pid, then its exit code, on the run's own socket.

No module of ocat or of the tests is imported here, so every run imports ocat afresh.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import sys
import tempfile
import time

# The point of this server: these are imported once, before the forks.
import chromadb
import chromadb.api.fastapi  # noqa: F401
import numpy  # noqa: F401
import onnxruntime  # noqa: F401
import tokenizers  # noqa: F401

def _run(request: dict, stdin: int, stdout: int, stderr: int) -> None:
    """Become the `ocat` process of one request (never returns)."""
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # TZ as the run's environment says
    tempfile.tempdir = None  # TMPDIR likewise, read again on first use
    sys.path.insert(0, os.getcwd())  # what `python -m` puts first
    sys.argv = ["ocat", *request["args"]]
    # SystemExit (and ocat's own exit handler, which ends by os._exit) end this process as they end `python -m ocat`.
    runpy.run_module("ocat", run_name="__main__", alter_sys=True)
    sys.exit(0)


def _wait(request: dict, fds: list[int]) -> None:
    """The waiter: fork the run, say its pid, wait for it, say its exit code (never returns)."""
    stdin, stdout, stderr, reply = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it; a waiter must reap its run
    pid = os.fork()
    if pid == 0:
        os.close(reply)
        _run(request, stdin, stdout, stderr)
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    with socket.socket(fileno=reply) as channel:
        channel.sendall(f"{json.dumps({'pid': pid})}\n".encode())
        _, status = os.waitpid(pid, 0)
        channel.sendall(f"{json.dumps({'code': os.waitstatus_to_exitcode(status)})}\n".encode())
    os._exit(0)


def serve(control_fd: int) -> None:
    """Answer requests until the tests' end of the socket closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    control = socket.socket(fileno=control_fd)
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return
        request = json.loads(message)
        if os.fork() == 0:
            control.close()
            _wait(request, fds)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    sys.path.pop(0)  # this script's folder: a run's path starts from its own working folder
    serve(int(sys.argv[1]))
