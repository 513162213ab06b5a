"""Fixtures and hooks: an isolated home, a fake and a real embedder, stores, the CLI as a
subprocess, a local OpenAI-compatible server so LLM calls never leave the machine, the model
archive and its server, and the `slow` mark applied by its definition (tests/support/slow.py).

The helpers these are built from live in tests/support/, where test files import them from."""

from __future__ import annotations

import gc
import itertools
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Generator, Iterator

import pytest

from ocat.memory import StoreLocation
from ocat.memory.storage.client_holds import close_opened_since, open_clients
from tests.support import CLOSED_URL, MODEL_DIR
from tests.support.chroma_server import ChromaServer
from tests.support.cli import Cli
from tests.support.derived_cache import link_derived_cache, make_derived_cache
from tests.support.empty_store import EMPTY_STORES, open_store
from tests.support.examples import BUDGET, is_property_test, is_quick_loop
from tests.support.fakes import FakeEmbedder, FakeLLMServer, serving
from tests.support.memory_temp import finished, mark_running, temporary_files_in_memory
from tests.support.model_server import Archive, ArchiveServer, build_archive, serving_archive
from tests.support.run_vectors import run_folder
from tests.support.slow import SLOW_FIXTURES, SlowWatch
from tests.support.templates import StoreTemplates
from tests.support.worker_end import end_workers_at_once

WATCH = SlowWatch()
# Tests marked slow by hand that passed without starting a process or running the model.
NEEDLESSLY_SLOW: list[str] = []
# Where each test's call-phase report is kept, to tell whether it passed.
CALL_REPORT = pytest.StashKey[pytest.TestReport]()
# Set on a test found needlessly slow; its teardown report carries the finding as a user property,
# which pytest-xdist sends from the worker that ran the test to the process that prints the summary.
FOUND_NEEDLESSLY_SLOW = pytest.StashKey[bool]()
NEEDLESSLY_SLOW_PROPERTY = "needlessly_slow"


# -- the slow mark -----------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Start listening for slow work (tests/support/slow.py); keep temporary files in memory;
    let the ocat processes the tests start hear Ctrl+C; give the quick loop its examples; collect
    garbage less often; keep the empty stores copied into tests with the run's temporary files;
    end a worker at once after its last report (tests/support/worker_end.py)."""
    WATCH.install()
    end_workers_at_once(config)
    _keep_rewritten_tests()
    config.stash[TEMP_IN_MEMORY] = temporary_files_in_memory() is not None
    _hear_interrupts()
    # Before any test module is imported: their @settings read it (tests/support/examples.py).
    BUDGET.quick = is_quick_loop(config.getoption("markexpr") or "")
    _small_late_chunks(config)
    gc.set_threshold(*GC_THRESHOLDS)
    # The empty stores copied into tests live with the run's other temporary files.
    EMPTY_STORES.folder = lambda: config._tmp_path_factory.mktemp("empty-stores")  # as sessionstart reads it


# How many tests pytest-xdist hands a worker at a time in the full suite. Its default deals up to
# a quarter of what is left: near the end one worker took ~40 Pilot and CLI tests at once, and ran
# them for 70-140 s while the other had nothing left (docs/PERFORMANCE.md, the eleventh round).
# The quick loop keeps the default: its workers ended within a second of each other.
FULL_SUITE_CHUNK = 4


def _small_late_chunks(config: pytest.Config) -> None:
    """Deal the full suite's tests a few at a time (FULL_SUITE_CHUNK), unless the command line chose."""
    if not BUDGET.quick and config.getoption("maxschedchunk", None) is None and hasattr(config.option, "maxschedchunk"):
        config.option.maxschedchunk = FULL_SUITE_CHUNK


@pytest.hookimpl(optionalhook=True)  # a run with `-p no:xdist` has no such hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker more than the cores. Part of every test's time is spent waiting (on
    the processes it starts, on Textual's idle checks), and one worker per core left the machine
    idle: in the full suite three workers took 592.6 s against two's 701.5 s (the eleventh round),
    in the quick loop 55.6 and 54.1 s against 62.4 and 59.3 s (the twelfth round)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


# The collector in the test process (never in the ocat processes the tests start): at Python's
# (700, 10, 10) a worker of the quick loop spent 11-15 s of its ~70 s of CPU collecting, mostly
# in full collections of a heap of 0.5 M objects (Textual's caches, litellm's and mypy's types).
# Fewer young collections, and the objects of the imports and collection frozen (below): a subset
# of 293 tests took 52.8 s of CPU against 58.7 (GC 8.2 s against 16.7).
GC_THRESHOLDS = (10_000, 10, 10)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Take what importing and collecting the tests made out of the collector's sight: it lives
    to the end of the run, and every full collection walked it again."""
    gc.collect()
    gc.freeze()


# How long Textual's Pilot sleeps between its looks at whether the test process is idle, and how
# little CPU it may have used meanwhile (the same 1/20 as Textual's own 1/50 s and 1/1000 s).
PILOT_IDLE_LOOK = 0.005


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Let Textual's Pilot look for idleness every 5 ms instead of every 20 ms.

    `pilot.press` waits for an idle process twice per key and `pilot.pause()` once
    (textual._wait.wait_for_idle): each wait sleeps at least one look, and a second when the
    screen was painted meanwhile. A step of the consent property test (a key, then a pause) spent
    ~90 ms asleep and ~12 ms of CPU: 94% of the Pilot tests' time was that sleep. Nothing waits on
    it for correctness: `_wait_for_screen` (all queued messages handled) still runs first, and a
    worker's effect is waited for by `wait_for` (tests/support/pilot.py); a process starved of CPU
    by other work already looked idle to the 20 ms look. Set before each test, as a test may
    import Textual itself; a process without Textual is left alone."""
    wait = sys.modules.get("textual._wait")
    if wait is not None and wait.SLEEP_GRANULARITY != PILOT_IDLE_LOOK:
        wait.SLEEP_GRANULARITY = PILOT_IDLE_LOOK
        wait.SLEEP_IDLE = PILOT_IDLE_LOOK / 20


def _keep_rewritten_tests() -> None:
    """Let pytest cache the test modules it rewrites for its assertions (and this process the
    bytecode of what it imports), where PYTHONDONTWRITEBYTECODE is set, as on this machine.

    pytest rewrites every test module's asserts as it imports it, and keeps the result beside the
    module (`__pycache__/*-pytest-*.pyc`) only when bytecode may be written: with the variable
    set, each worker of each run rewrote all of them again, 7 of the 11 s of CPU a worker spent
    collecting (measured: 11.0 -> 3.9 s with the cache). .ci/run compiles ocat and the tests
    to bytecode in the tree anyway; the processes the tests start still inherit the variable."""
    sys.dont_write_bytecode = False


def _hear_interrupts() -> None:
    """Undo an ignored SIGINT inherited from whatever started the run.

    A shell without job control starts a command put in the background (`pytest ... &` in a
    script) with SIGINT ignored, and every process started from it inherits that: the ocat
    processes the Ctrl+C tests interrupt would then carry on to the end (seen: a 50 MB add ran
    for minutes, and three tests failed). Python's own handler is what an ocat process has
    when started from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


TEMP_IN_MEMORY = pytest.StashKey[bool]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mark the run's in-memory folder as under way, so that a next run can tell it from one
    that ended (tests/support/memory_temp.py). Under xdist the controller, whose folder holds
    the workers', marks it."""
    factory = session.config._tmp_path_factory  # as pytest's own sessionfinish reads it
    if session.config.stash.get(TEMP_IN_MEMORY, False) and factory._given_basetemp is None:
        mark_running(factory.getbasetemp())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that passed or was interrupted gives its temporary folder's memory back; a failed
    run's stays for a look (pytest keeps the last 3 runs' folders). pytest's own
    `tmp_path_retention_policy = "failed"` would do this, but it also deletes each passing test's
    tmp_path at once, and the next test of that name gets the same path, where chromadb's cache
    of clients by path hands it the deleted store's client."""
    factory = session.config._tmp_path_factory
    basetemp = factory._basetemp
    # Under xdist the workers' folders are inside the controller's, which removes them all.
    if session.config.stash.get(TEMP_IN_MEMORY, False) and basetemp is not None and factory._given_basetemp is None:
        finished(basetemp, passed=exitstatus == 0, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark slow every test that asks (directly or through another fixture) for a slow fixture,
    and run the longest first: the property tests, then the slow tests, then the rest.
    pytest-xdist hands tests out in this order as workers come free, and deals each worker a
    chunk of what is left; a 20-70 s test dealt late kept one worker busy while the other had
    nothing left to run (the consent property test, 68.6 s in the full suite, began at 613 s of
    a 772 s run, whose other worker ended at 634 s: docs/PERFORMANCE.md's eleventh round)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # Stable: file order within each group.
    items.sort(key=lambda item: (not is_property_test(item), item.get_closest_marker("slow") is None))


@pytest.fixture(autouse=True)
def chroma_clients_closed() -> Iterator[None]:
    """Close the Chroma clients a test left open (most tests open a store and never close it):
    each kept ~6 native threads for the worker's life, and a worker with thousands of them (2,196
    when help and focus began, after the quick unit tests) made every later Pilot test wait out
    Textual's idle checks (docs/PERFORMANCE.md, the eleventh round)."""
    before = open_clients()
    yield
    close_opened_since(before)


@pytest.fixture(autouse=True)
def recursion_limit_kept() -> Iterator[None]:
    """Fail a test that leaves the process's recursion limit changed (and put it back): what a
    later test in the same worker reads depends on it (the history import names JSON nested too
    deeply by the decoder's RecursionError), so a leak fails another test, in some orders only."""
    limit = sys.getrecursionlimit()
    yield
    if sys.getrecursionlimit() != limit:
        changed = sys.getrecursionlimit()
        sys.setrecursionlimit(limit)
        pytest.fail(f"this test left the recursion limit at {changed} (it was {limit}): put it back")


@pytest.fixture(autouse=True)
def slow_by_definition(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test not marked slow that started a process or ran the real model: `-m "not slow"`
    is the quick loop, and a test that does either belongs outside it."""
    WATCH.start()
    yield
    seen = WATCH.stop()
    marked = request.node.get_closest_marker("slow") is not None
    if seen and not marked:
        pytest.fail(f"this test {' and '.join(seen)}, so it is slow: mark it @pytest.mark.slow")
    if marked and not seen and not SLOW_FIXTURES & set(request.fixturenames) and not WATCH.heavy_loaded() \
            and _passed(request.node):
        request.node.stash[FOUND_NEEDLESSLY_SLOW] = True


def _passed(item: pytest.Item) -> bool:
    # A failed or skipped test may have stopped before its slow part.
    report = item.stash.get(CALL_REPORT, None)
    return report is not None and report.passed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call-phase report, which the fixture above reads at teardown; mark the teardown
    report of a test that fixture found needlessly slow."""
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    if report.when == "teardown" and item.stash.get(FOUND_NEEDLESSLY_SLOW, False):
        report.user_properties.append((NEEDLESSLY_SLOW_PROPERTY, True))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Gather the needlessly slow tests from the reports, where they come in from every xdist worker."""
    if (NEEDLESSLY_SLOW_PROPERTY, True) in report.user_properties:
        NEEDLESSLY_SLOW.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the tests marked slow by hand that did nothing slow: their mark can go."""
    if NEEDLESSLY_SLOW:
        terminalreporter.section("marked slow, but started no process and ran no model")
        for nodeid in NEEDLESSLY_SLOW:
            terminalreporter.line(nodeid)


# -- home and model ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def derived_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache files ocat derives from the model and litellm, made once per worker (tests/support/derived_cache.py)."""
    return make_derived_cache(tmp_path_factory.mktemp("derived-cache"), MODEL_DIR)


HOMES = itertools.count()


def _new_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new folder under the run's `homes/`, named by a counter. pytest's mktemp lists its whole
    folder to number each new one, and the homes were most of it: a worker's 612 homes and 300
    tmp_paths took 0.6 s of CPU (1.0 s wall) to number, 0.13 s (0.3 s) this way and beside them."""
    homes = tmp_path_factory.getbasetemp() / "homes"
    homes.mkdir(exist_ok=True)
    while True:
        home = homes / f"home{next(HOMES)}"
        try:
            home.mkdir()
            return home
        except FileExistsError:
            continue


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, derived_cache: Path) -> Path:
    """Every test gets its own HOME and XDG folders, so no real user file is read or written; its
    cache folder starts with what ocat derives from the shared model and litellm's table."""
    home = _new_home(tmp_path_factory)
    link_derived_cache(derived_cache, home / ".cache")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(var, str(home / sub))
    for name in list(os.environ):
        if name.startswith("OCAT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OCAT_EMBEDDING_MODEL_PATH", str(MODEL_DIR))
    # One thread per model: two workers and their ocat processes share two cores, where two
    # models on every core each took ~40% longer on the same texts (docs/PERFORMANCE.md).
    monkeypatch.setenv("OCAT_EMBEDDING_THREADS", "1")
    # Should a test ever look for the model elsewhere, its download goes to a closed port on
    # loopback (refused at once), never to the internet.
    monkeypatch.setenv("OCAT_EMBEDDING_DOWNLOAD_URL", CLOSED_URL)
    # Dates on screen are local time: pin the zone so pictures match on every machine.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return home


@pytest.fixture
def model_in_chroma_cache(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The model where a user's machine has it (ChromaDB's cache in the test's home), not named
    by OCAT_EMBEDDING_MODEL_PATH: screens then show the same path on every machine."""
    from ocat.memory.embedding.model_files import chroma_model_dir

    folder = chroma_model_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(MODEL_DIR, target_is_directory=True)
    monkeypatch.delenv("OCAT_EMBEDDING_MODEL_PATH")
    return folder


def _require_model() -> None:
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(f"the embedding model is missing: {MODEL_DIR} (run `ocat --fetch-model`, which puts it where "
                    "the tests look, or set OCAT_EMBEDDING_MODEL_PATH to its folder)")


@pytest.fixture(scope="session")
def model_archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    """ChromaDB's archive layout, built from the real model files in ../shared/models."""
    _require_model()
    return build_archive(tmp_path_factory.mktemp("archive") / "onnx.tar.gz")


@pytest.fixture
def server(model_archive: Archive) -> Iterator[ArchiveServer]:
    """The archive served on loopback for one test; handlers still waiting are released at teardown."""
    with serving_archive(model_archive) as state:
        yield state


# -- embedders and stores ----------------------------------------------------------------------


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    """A fresh fake embedder."""
    return FakeEmbedder()


@pytest.fixture(scope="session")
def real_embedder() -> Any:
    """The real all-MiniLM-L6-v2 int8 model from ../shared/models (shared by all tests), on one
    thread as every ocat process of the suite (OCAT_EMBEDDING_THREADS, isolated_home): the pool of
    two spun on cores the other workers needed (the tests that use it: 50.0 -> 43.5 s of CPU)."""
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    _require_model()
    return OnnxMiniLMEmbedder(MODEL_DIR, threads=1)


@pytest.fixture(scope="session")
def run_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where the dev-set tests and the bench smoke runs keep the real model's vectors,
    shared by every worker of the run (tests/support/run_vectors.py)."""
    return run_folder(tmp_path_factory)


@pytest.fixture
def store(tmp_path: Path, fake_embedder: FakeEmbedder) -> Any:
    """An empty store on disk with the fake embedder (a copy of one made once: tests/support/empty_store.py)."""
    return open_store(tmp_path / "store", fake_embedder, name="test")


@pytest.fixture
def real_store(tmp_path: Path, real_embedder: Any) -> Any:
    """An empty store on disk with the real embedding model."""
    from ocat.memory import MemoryStore, StoreLocation

    return MemoryStore.open(StoreLocation(path=tmp_path / "real-store"), real_embedder, name="test")


@pytest.fixture
def session(store: Any) -> Any:
    """A chat session on the fake-embedder store, with default settings (no user config, no env)."""
    from ocat.config.loading import load_settings
    from ocat.chat.session import ChatSession

    return ChatSession(load_settings(env={}), store=store)


# -- processes and servers ---------------------------------------------------------------------


@pytest.fixture
def cli(isolated_home: Path, tmp_path: Path) -> Cli:
    """The ocat CLI, isolated: its own HOME, XDG folders and store."""
    return Cli(home=isolated_home, store_path=tmp_path / "cli-store")


@pytest.fixture(scope="session")
def store_templates(tmp_path_factory: pytest.TempPathFactory) -> StoreTemplates:
    """Stores built once per worker through the CLI, copied into the tests that start from them."""
    return StoreTemplates(tmp_path_factory.mktemp("store-templates"))


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A fake OpenAI-compatible server on loopback, for the whole test."""
    with serving(FakeLLMServer()) as state:
        yield state


@pytest.fixture
def chroma_run(tmp_path: Path) -> Iterator[ChromaServer]:
    """A real Chroma server (`chroma run`) on a free loopback port, which a test may stop and start again."""
    server = ChromaServer(tmp_path / "server-data").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chroma_server(chroma_run: ChromaServer) -> StoreLocation:
    """Where the `chroma_run` server is reached: plain HTTP on loopback."""
    return chroma_run.location


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (the Pilot tests) run on asyncio, Textual's loop."""
    return "asyncio"
