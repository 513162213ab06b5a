"""The warm interpreter behind tests/support/warm_start.py, run as a script (never imported).

It imports the libraries that cost an `ocat` process most of its start (chromadb ~2 s, the
embedder's onnxruntime, tokenizers and numpy; the MCP SDK, ~1 s, which the test MCP servers
import too) once, then waits for requests on two sockets: the one it was given (its number is
the script's first argument; the test worker's `Cli` uses it) and one it listens on, named by
its second argument (an abstract Unix socket, which tests/support/warm_exec.py connects to for
a test that starts a process by its command line).

Each request brings a JSON line (the Python command line after `python`, the environment and
the working folder) and four file descriptors: the run's stdin, stdout, stderr and a socket of
its own. For each, it forks a waiter, which forks the run: the run puts the descriptors in place
of 0, 1 and 2, takes the environment, the folder and argv, and runs `-m MODULE`, `-c CODE` or a
script as `python` would; the waiter reports the run's pid, then its exit code, on the run's own
socket, and kills the run should that socket close first (its owner died or gave up on it).

ocat's modules that most runs import are imported here too (WARM_OCAT); no module of the tests is.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import types

# What costs an `ocat` process most of its start. Chroma loads its Rust bindings (~0.2 s) only
# as a client opens, which every run that opens a store did.
# The lean graph of the model the tests use (tests/support/derived_cache.py), whose sessions are loaded here.
MODEL_VARIABLE = "PYTEST_OCAT_WARM_MODEL"
# The tokenizer of the model the tests use, read here as ocat reads it.
TOKENIZER_VARIABLE = "PYTEST_OCAT_WARM_TOKENIZER"
WARM = ("chromadb", "chromadb.api.fastapi", "chromadb.api.rust", "filelock", "numpy", "onnxruntime", "tokenizers",
        # The MCP SDK (~1 s more, mostly mcp.types building its pydantic models): what the test MCP
        # servers (tests/support/mcp_fixture_server.py) and ocat's MCP client and `ocat mcp` import.
        # No warm run is asked whether it imported them: the tests that check what a start imports
        # (tests/cli/test_startup.py, test_cli.py, ...) start a new interpreter, as they must for chromadb.
        "anyio", "mcp", "mcp.client.stdio", "mcp.server.mcpserver", "mcp.server.stdio", "mcp.types",
        # What httpx imports as its first client is made (~0.13 s of each chat's and `--ask`'s
        # run: the connection pools, h11, h2, anyio's asyncio backend) and certifi, whose CAs it trusts.
        "httpcore._async.connection_pool", "httpcore._async.http2", "httpcore._sync.connection_pool",
        "httpcore._sync.http2", "anyio._backends._asyncio", "h11", "certifi")
# ocat's own modules that most runs import (~0.25 s of every run's CPU, most of it making
# dataclasses and compiling patterns; ~840 warm runs in a full run), and what they import on
# first use (requests for the model's files; detect-secrets' plugins, ~0.2 s, for the redaction
# that every write runs). None of them reads the environment or the working folder, or starts a
# thread, as it is imported (tests/cli/test_warm_start.py checks), so a run forked from here behaves as one
# that imported them itself; a run that imports others (the full-screen app, the line mode's
# prompt) imports them as before. A test that changes one of these modules for a run does it
# in the run (`-c`), which changes the run's own copy.
WARM_OCAT = ("ocat.cli.dispatch", "ocat.headless.actions", "ocat.headless.common", "ocat.headless.transfer",
             "ocat.memory.opening", "ocat.memory.named_stores", "ocat.memory.retrieval.retrieve",
             "ocat.memory.retrieval.filters", "ocat.memory.retrieval.across_stores", "ocat.memory.ingest.documents",
             "ocat.memory.ingest.folders", "ocat.memory.storage.export_import", "ocat.memory.storage.pins",
             "ocat.operations.stats", "ocat.operations.history", "ocat.chat.session", "ocat.repl",
             "ocat.mcp_server.server", "ocat.mcp_server.stdio", "ocat.text.secrets", "ocat.memory.retrieval.given",
             "ocat.tools.memory_tools", "ocat.tools.remember_tool", "ocat.memory.store_counts",
             "ocat.memory.ingest.paths", "difflib", "statistics", "requests")


def _run(request: dict, stdin: int, stdout: int, stderr: int) -> None:
    """Become the process of one request and end as `python` would (never returns)."""
    for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # TZ as the run's environment says
    tempfile.tempdir = None  # TMPDIR likewise, read again on first use
    argv = request.get("argv") or ["-m", "ocat", *request["args"]]
    try:
        _main(argv)
    except SystemExit as leaving:
        _finish(_exit_code(leaving.code))
    except KeyboardInterrupt as stopped:
        _print_uncaught(stopped)
        _finish(-signal.SIGINT)
    except BaseException as uncaught:
        _print_uncaught(uncaught)
        _finish(1)
    _finish(0)


def _print_uncaught(error: BaseException) -> None:
    """The traceback `python` prints, without the frames of this server and of runpy."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def _main(argv: list[str]) -> None:
    """Run `python *argv`: `-m MODULE`, `-c CODE` or a script, each with the path and argv `python` gives it."""
    if argv[0] == "-m":  # what `python -m` puts first on the path is the working folder
        sys.path.insert(0, os.getcwd())
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":  # `python -c` puts "" first, and runs the code in a fresh __main__
        sys.path.insert(0, "")
        sys.argv = ["-c", *argv[2:]]
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    else:  # a script: its own folder first
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


def _exit_code(code: object) -> int:
    """The status `sys.exit(code)` ends an interpreter with."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code: int) -> None:
    """End the run as an interpreter ends (its non-daemon threads joined, its exit handlers run,
    its output flushed), then leave by os._exit: the C library's exit would run onnxruntime's
    static destructors, which wait forever on a lock the server's threads held at the fork."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:  # died of a signal, as an uncaught KeyboardInterrupt ends an interpreter
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


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
        try:
            channel.sendall(f"{json.dumps({'pid': pid})}\n".encode())
        except OSError:
            # Its owner is gone already (a launcher killed as soon as the run spoke): the
            # poll below sees the closed channel and the run goes, as it would have a moment later.
            pass
        ended = os.pidfd_open(pid)
        # Nobody writes to the channel: it turns readable only when its other end closes, and a
        # run whose owner is gone (a launcher killed by SIGKILL, a test that gave up) goes too.
        if ended not in _readable(ended, channel.fileno()):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        try:
            channel.sendall(f"{json.dumps({'code': os.waitstatus_to_exitcode(status)})}\n".encode())
        except OSError:
            pass  # nobody left to tell
    os._exit(0)


def _readable(*fds: int) -> set[int]:
    """Which of `fds` are readable (data, or the other end closed), waiting for one to be. poll,
    not select: the control socket keeps the number it had in the test worker, and a worker that
    has run many tests holds more than the 1,024 descriptors select() can watch."""
    watcher = select.poll()
    for fd in fds:
        watcher.register(fd, select.POLLIN)
    return {fd for fd, _ in watcher.poll()}


def warm_up() -> None:
    """Import what the runs share, once, before the forks: the point of this server."""
    for name in WARM + WARM_OCAT:
        importlib.import_module(name)
    for plugin, *_ in importlib.import_module("ocat.text.secrets")._PLUGINS:
        importlib.import_module(f"detect_secrets.plugins.{plugin}")
    lean = os.environ.get(MODEL_VARIABLE)
    if lean and os.path.isfile(lean):
        _load_sessions(lean)
    tokenizer = os.environ.get(TOKENIZER_VARIABLE)
    if tokenizer and os.path.isfile(tokenizer):
        # Read as ocat reads it (ocat.memory.embedding.embedders.tokenizer_of, once per process
        # and file): a run that embeds finds it read (~0.07-0.1 s of CPU).
        from pathlib import Path

        importlib.import_module("ocat.memory.embedding.embedders").tokenizer_of(Path(tokenizer))


def _load_sessions(lean: str) -> None:
    """Load the model's sessions as the runs' ocat would (ocat.memory.embedding.embedders), and
    hand a run the one it asks for instead of loading it again (~0.2 s of every run that embeds).

    Only a session on one thread: it has no thread pool, whose threads a fork would leave behind.
    A run asks for the same session when it opens the same file (its cache's hard link to `lean`,
    tests/support/derived_cache.py) with the same options; anything else is loaded as asked, so
    should ocat's options change, its runs load their own sessions again: slower, never different."""
    import onnxruntime

    load = onnxruntime.InferenceSession
    loaded: dict[tuple, object] = {}

    def key(source: object, options: object, providers: object, disabled: object) -> tuple | None:
        if not isinstance(source, str) or getattr(options, "intra_op_num_threads", 0) != 1:
            return None
        try:
            stat = os.stat(source)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, options.log_severity_level,
                options.enable_mem_pattern, tuple(providers or ()), tuple(disabled or ()))

    for disabled in (None, ["ConstantFolding"]):  # ocat's two: for many texts, and for a few
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.enable_mem_pattern = False
        options.intra_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        loaded[key(lean, options, providers, disabled)] = load(
            lean, sess_options=options, providers=providers, disabled_optimizers=disabled)

    def session(path_or_bytes: object, sess_options: object = None, providers: object = None,
                provider_options: object = None, **kwargs: object) -> object:
        found = None
        if provider_options is None and set(kwargs) <= {"disabled_optimizers"}:
            found = loaded.get(key(path_or_bytes, sess_options, providers, kwargs.get("disabled_optimizers")))
        if found is not None:
            return found
        return load(path_or_bytes, sess_options, providers, provider_options, **kwargs)

    onnxruntime.InferenceSession = session


def serve(control_fd: int, address: str) -> None:
    """Answer requests until the tests' end of the control socket closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    control = socket.socket(fileno=control_fd)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Listening before warming up: a launcher that comes early waits for its turn rather than
    # finding nobody there and starting a cold interpreter.
    listener.bind("\0" + address)
    listener.listen(64)
    control.send(b"listening")
    warm_up()
    while True:
        if control.fileno() in _readable(control.fileno(), listener.fileno()):
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
            if not message:
                return
        else:  # a launcher: its connection is the run's own socket
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
            if not message or len(fds) != 3:  # the launcher died before it asked
                connection.close()
                for fd in fds:
                    os.close(fd)
                continue
            fds = [*fds, connection.detach()]
        if os.fork() == 0:
            try:
                control.close()
                listener.close()
                _wait(json.loads(message), fds)
            except BaseException:
                # A waiter never ends as an interpreter does: its exit would run onnxruntime's
                # static destructors, which wait forever on a lock held at the fork (see
                # _finish). One that failed says why and goes, and never serves.
                traceback.print_exc()
                os._exit(1)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    sys.path.pop(0)  # this script's folder: a run's path starts from its own working folder
    serve(int(sys.argv[1]), sys.argv[2])
    os._exit(0)  # nothing to tear down, and an interpreter's exit here could hang (see _finish)
