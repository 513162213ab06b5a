"""Fetching the local embedding model end to end, against an archive served on loopback: a
download lands whole in ChromaDB's layout, and every way one can fail leaves nothing behind."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ocat.config.loading import EmbeddingSettings, load_settings
from ocat.errors import EmbeddingError
from ocat.memory.embedding.model_files import (
    CHROMA_MODEL_SHA256,
    CHROMA_MODEL_URL,
    ModelSource,
    ProgressPrinter,
    candidate_dirs,
    chroma_model_dir,
    download_model,
    ensure_model,
    find_model,
)
from tests.support import CLOSED_URL, MODEL_DIR
from tests.support.cli import Cli
from tests.support.model_server import (
    FETCH_COMMAND,
    MODEL_FILE_NAMES,
    OFFLINE_URL,
    Archive,
    ArchiveServer,
    assert_names_the_ways_without_internet,
    assert_nothing_left,
    assert_same_files,
)

def embedding_settings(**overrides: object) -> EmbeddingSettings:
    """The shipped embedding settings (model_path null: ChromaDB's cache) with some keys changed."""
    return load_settings(env={}, overrides={f"embedding.{key}": value for key, value in overrides.items()}).embedding


def served(server: ArchiveServer, route: str = "", **overrides: object) -> EmbeddingSettings:
    """Settings that download from the local server, expecting the real archive's SHA-256."""
    source = {"download_url": server.url(route), "download_sha256": server.archive.sha256}
    return embedding_settings(**source | overrides)


def copied(archive: Archive, **overrides: object) -> EmbeddingSettings:
    """Settings that fetch a file:// copy of an archive, expecting its SHA-256."""
    source = {"download_url": archive.path.as_uri(), "download_sha256": archive.sha256}
    return embedding_settings(**source | overrides)


def assert_tells_how_to_retry(error: pytest.ExceptionInfo[EmbeddingError]) -> None:
    message = str(error.value)
    assert FETCH_COMMAND in message
    assert "embedding.model_path" in message


# Success


def test_download_into_chromas_cache_gives_the_six_files_byte_for_byte(server: ArchiveServer) -> None:
    settings = served(server)
    calls: list[tuple[int, int | None]] = []

    fetched = ensure_model(settings, progress=lambda done, total: calls.append((done, total)))

    target = Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    assert fetched.path == target == chroma_model_dir()
    assert fetched.downloaded and fetched.downloaded_bytes == len(server.archive.data)
    assert sorted(os.listdir(target)) == sorted(MODEL_FILE_NAMES)
    assert_same_files(target)
    assert server.requests == ["/onnx.tar.gz"]
    leftovers = sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock"))
    assert leftovers == ["onnx"]
    assert "Downloaded the embedding model" in fetched.describe()


def test_progress_counts_up_to_the_archive_size(server: ArchiveServer) -> None:
    calls: list[tuple[int, int | None]] = []

    ensure_model(served(server), progress=lambda done, total: calls.append((done, total)))

    size = len(server.archive.data)
    done = [d for d, _ in calls]
    assert len(done) > 2  # 0, then several reads of a 20+ MB archive
    assert done == sorted(set(done)), "byte counts must only go up"
    assert done[0] == 0 and done[-1] == size
    assert {total for _, total in calls} == {size}


def test_a_second_call_finds_the_model_without_a_request(server: ArchiveServer) -> None:
    settings = served(server)
    first = ensure_model(settings)
    calls: list[tuple[int, int | None]] = []

    again = ensure_model(settings, progress=lambda done, total: calls.append((done, total)))

    assert again.path == first.path
    assert not again.downloaded and again.downloaded_bytes == 0
    assert "is ready in" in again.describe()
    assert calls == []
    assert len(server.requests) == 1


def test_the_downloaded_model_is_found_whatever_xdg_cache_home_says(
    server: ArchiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = served(server)
    fetched = ensure_model(settings)

    # ChromaDB keeps its model under ~/.cache whatever XDG_CACHE_HOME says; so must ocat.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))

    assert chroma_model_dir() == fetched.path
    assert candidate_dirs(settings)[0][1] == fetched.path
    assert find_model(settings) == fetched.path
    assert not ensure_model(settings).downloaded
    assert len(server.requests) == 1


def test_the_embedder_runs_from_the_downloaded_folder(server: ArchiveServer, real_embedder: Any) -> None:
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    fetched = ensure_model(served(server))

    [vector] = OnnxMiniLMEmbedder(fetched.path).embed(["hello"])

    assert len(vector) == 384
    [expected] = real_embedder.embed(["hello"])
    assert max(abs(a - b) for a, b in zip(vector, expected)) < 1e-5


def test_a_file_url_to_a_copy_of_the_archive_works(server: ArchiveServer, tmp_path: Path) -> None:
    # The air-gapped path: the archive carried over on a stick, in a folder with a space.
    copy = tmp_path / "usb stick" / "onnx.tar.gz"
    copy.parent.mkdir()
    copy.write_bytes(server.archive.data)
    settings = copied(Archive(copy, server.archive.data, server.archive.sha256))

    fetched = ensure_model(settings)

    assert fetched.path == chroma_model_dir()
    assert fetched.downloaded_bytes == len(server.archive.data)
    assert_same_files(fetched.path)
    assert server.requests == []


def test_an_existing_folder_gets_the_model_and_keeps_its_other_files(server: ArchiveServer, tmp_path: Path) -> None:
    folder = tmp_path / "my models"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    (folder / "tokenizer.json").write_text("a stale, broken copy")  # an earlier copy without model.onnx

    fetched = ensure_model(served(server, model_path=str(folder)))

    assert fetched.path == folder and fetched.downloaded
    assert (folder / "keep.txt").read_text() == "mine"
    assert sorted(os.listdir(folder)) == sorted([*MODEL_FILE_NAMES, "keep.txt"])
    assert_same_files(folder)
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*.part"))
    assert not chroma_model_dir().exists(), "a configured model_path is the only place written"


# Failures: each raises EmbeddingError saying how to retry, and leaves nothing behind


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(server: ArchiveServer) -> None:
    settings = served(server, download_sha256="0" * 64)

    with pytest.raises(EmbeddingError, match="SHA-256") as error:
        ensure_model(settings)

    assert server.archive.sha256 in str(error.value)  # what the file really hashed to
    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_a_refused_connection_fails_with_the_retry_command() -> None:
    settings = embedding_settings(download_url=CLOSED_URL)

    with pytest.raises(EmbeddingError, match="refused") as error:
        ensure_model(settings)

    assert CLOSED_URL in str(error.value)
    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_offline_the_error_names_the_ways_that_need_no_internet() -> None:
    settings = embedding_settings(download_url=OFFLINE_URL)

    with pytest.raises(EmbeddingError, match="is this machine offline") as error:
        ensure_model(settings)

    assert_names_the_ways_without_internet(str(error.value))
    assert_nothing_left(chroma_model_dir())


def test_a_download_cut_off_before_its_announced_size_is_discarded(server: ArchiveServer) -> None:
    calls: list[tuple[int, int | None]] = []

    with pytest.raises(EmbeddingError, match="stopped after") as error:
        ensure_model(served(server, "half"), progress=lambda done, total: calls.append((done, total)))

    assert calls and calls[-1][0] < len(server.archive.data)  # it did receive part of it
    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_a_short_download_without_a_size_is_caught_by_the_checksum(server: ArchiveServer) -> None:
    calls: list[tuple[int, int | None]] = []

    with pytest.raises(EmbeddingError, match="SHA-256") as error:
        ensure_model(served(server, "half-unsized"), progress=lambda done, total: calls.append((done, total)))

    assert {total for _, total in calls} == {None}
    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


@pytest.mark.parametrize("route", ["half-chunked", "not-http"])
def test_a_broken_http_answer_is_an_embedding_error_and_leaves_nothing(server: ArchiveServer, route: str) -> None:
    # http.client's own errors (IncompleteRead, BadStatusLine) are not OSErrors: they too
    # must become the one-line EmbeddingError, with no partial file left.
    with pytest.raises(EmbeddingError) as error:
        ensure_model(served(server, route))

    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_a_file_with_the_right_checksum_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    # A mirror configured with its own checksum, serving something else than a .tar.gz.
    page = tmp_path / "onnx.tar.gz"
    page.write_bytes(b"<html>Please log in to the hotel wifi</html>")
    settings = copied(Archive(page, page.read_bytes(), hashlib.sha256(page.read_bytes()).hexdigest()))

    with pytest.raises(EmbeddingError, match="cannot unpack") as error:
        ensure_model(settings)

    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_a_404_names_the_status(server: ArchiveServer) -> None:
    with pytest.raises(EmbeddingError, match="404") as error:
        ensure_model(served(server, "missing"))

    assert server.url("missing") in str(error.value)
    assert_tells_how_to_retry(error)
    assert_nothing_left(chroma_model_dir())


def test_a_server_that_never_answers_times_out(server: ArchiveServer, tmp_path: Path) -> None:
    settings = served(server, "silent")
    target = tmp_path / "models" / "onnx"

    with pytest.raises(EmbeddingError, match="did not answer in time") as error:
        download_model(ModelSource(server.url("silent"), server.archive.sha256), target, settings, timeout=0.5)

    assert_tells_how_to_retry(error)
    assert_nothing_left(target)


def test_a_server_that_stalls_midway_times_out_and_nothing_is_kept(server: ArchiveServer, tmp_path: Path) -> None:
    settings = served(server, "stall")
    target = tmp_path / "models" / "onnx"

    with pytest.raises(EmbeddingError, match="did not answer in time") as error:
        download_model(ModelSource(server.url("stall"), server.archive.sha256), target, settings, timeout=0.5)

    assert_tells_how_to_retry(error)
    assert_nothing_left(target)


def test_download_off_and_no_model_fails_without_a_request(server: ArchiveServer) -> None:
    settings = served(server, download=False)

    with pytest.raises(EmbeddingError, match="embedding.download is off") as error:
        ensure_model(settings)

    assert_tells_how_to_retry(error)
    assert server.requests == []
    assert not chroma_model_dir().exists()


# Hostile archives


def _archive_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Archive:
    with tarfile.open(path, "w:gz") as tar:
        for info, content in members:
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    data = path.read_bytes()
    return Archive(path, data, hashlib.sha256(data).hexdigest())


def _file(name: str, content: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), content


def _link(name: str, points_to: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, points_to
    return info, None


def test_a_malicious_archive_writes_nothing_outside_its_staging_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.onnx"
    victim.write_bytes(b"original")
    absolute = tmp_path / "absolute.txt"
    target = tmp_path / "models" / "onnx"
    archive = _archive_of(
        tmp_path / "evil.tar.gz",
        [
            _file("../evil.txt", b"escaped"),
            _file("onnx/../../../evil-deeper.txt", b"escaped"),
            _file(str(absolute), b"escaped"),
            _file("onnx/tokenizer.json", (MODEL_DIR / "tokenizer.json").read_bytes()),
            _link("onnx/model.onnx", str(victim), tarfile.SYMTYPE),
            _link("onnx/model.onnx", "../../outside/victim.onnx", tarfile.LNKTYPE),
        ],
    )
    settings = copied(archive, model_path=str(target))

    with pytest.raises(EmbeddingError, match="archive has no model.onnx") as error:
        ensure_model(settings)

    assert_tells_how_to_retry(error)
    assert_nothing_left(target)
    assert victim.read_bytes() == b"original"
    assert sorted(os.listdir(outside)) == ["victim.onnx"]
    assert not absolute.exists()
    assert not (target.parent / "evil.txt").exists()
    assert not (tmp_path / "evil-deeper.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["evil.tar.gz", "models", "outside"]


def test_model_files_under_escaping_names_land_in_the_target_only(tmp_path: Path) -> None:
    target = tmp_path / "models" / "onnx"
    archive = _archive_of(
        tmp_path / "odd.tar.gz",
        [
            _file("../../model.onnx", b"a model"),
            _file(str(tmp_path / "tokenizer.json"), b"a tokenizer"),
            _file("onnx/notes.txt", b"not a model file"),
        ],
    )
    settings = copied(archive, model_path=str(target))

    fetched = ensure_model(settings)

    assert fetched.path == target
    assert sorted(os.listdir(target)) == ["model.onnx", "tokenizer.json"]
    assert (target / "model.onnx").read_bytes() == b"a model"
    assert sorted(os.listdir(tmp_path)) == ["models", "odd.tar.gz"]


# ChromaDB


def test_our_archive_url_and_checksum_are_chromadbs() -> None:
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    assert CHROMA_MODEL_URL == ONNXMiniLM_L6_V2.MODEL_DOWNLOAD_URL
    assert CHROMA_MODEL_SHA256 == ONNXMiniLM_L6_V2._MODEL_SHA256
    # DOWNLOAD_PATH was fixed from whatever HOME was when chromadb was first imported, so only
    # the part under the home folder can be compared here (the test below compares it whole).
    theirs = ONNXMiniLM_L6_V2.DOWNLOAD_PATH / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME
    ours = chroma_model_dir().relative_to(Path.home())
    assert theirs.parts[-len(ours.parts) :] == ours.parts
    assert ModelSource.from_settings(embedding_settings()) == ModelSource(CHROMA_MODEL_URL, CHROMA_MODEL_SHA256)


def test_chromadb_uses_the_model_ocat_downloaded(server: ArchiveServer, real_embedder: Any) -> None:
    """ChromaDB computes its model folder from HOME when it is imported, so it is asked in a
    fresh process with this test's HOME; its own download is pointed at a closed port."""
    fetched = ensure_model(served(server))
    script = (
        "import json\n"
        "from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2 as F\n"
        "from ocat.memory.embedding.model_files import chroma_model_dir\n"
        "[vector] = F()(['hello'])\n"
        "print(json.dumps({'chroma': str(F.DOWNLOAD_PATH / F.EXTRACTED_FOLDER_NAME),\n"
        "                  'ocat': str(chroma_model_dir()), 'vector': [float(x) for x in vector]}))\n"
    )
    blocked = "http://127.0.0.1:9"
    env = {**os.environ, "HTTP_PROXY": blocked, "HTTPS_PROXY": blocked, "ANONYMIZED_TELEMETRY": "False"}
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr

    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["chroma"] == seen["ocat"] == str(fetched.path) == str(chroma_model_dir())
    assert len(server.requests) == 1
    [expected] = real_embedder.embed(["hello"])
    cosine = sum(a * b for a, b in zip(seen["vector"], expected)) / math.sqrt(sum(a * a for a in seen["vector"]))
    assert cosine > 0.999




# The progress line


def test_progress_printer_writes_a_line_every_tenth_when_not_a_terminal() -> None:
    stream = io.StringIO()
    printer = ProgressPrinter(stream)

    for done in range(0, 10_000_001, 500_000):
        printer(done, 10_000_000)
    printer.finish()

    lines = stream.getvalue().splitlines()
    assert lines[0] == "ocat: fetching the embedding model all-MiniLM-L6-v2 (needed once, 10.0 MB)"
    assert lines[1:] == [f"ocat: downloading the embedding model: {p}% of 10.0 MB" for p in range(10, 101, 10)]


@pytest.mark.parametrize("how", ["truncated", "altered"])
def test_fetch_model_reports_a_damaged_cached_graph_and_makes_it_again(cli: Cli, how: str) -> None:
    """`--fetch-model` said the model was ready while its cached graph was cut short (every query
    then exited 1) or altered (every vector wrong)."""
    from tests.unit.test_trust_derived import _graph_cache, damage_graph

    graph = _graph_cache(cli)
    good = damage_graph(graph, how)
    done = cli("--fetch-model", "--output", "json")
    assert done.returncode == 0, done.stderr
    cache = done.json()["result"]["graph_cache"]
    assert cache["path"] == str(graph) and cache["made"] is True and cache["problem"]
    lines = [line for line in done.stderr.splitlines() if "cached graph" in line]
    assert len(lines) == 1 and "was damaged" in lines[0], done.stderr
    assert graph.read_bytes() == good
    again = cli("--fetch-model", "--output", "json")
    assert again.json()["result"]["graph_cache"] == {"path": str(graph), "problem": None, "made": False}
    assert "cached graph" not in again.stderr
