"""Stores that several CLI tests start from, built once per test worker and copied into each test.

Building a store through the CLI embeds every record with the real model: three hundred
exchanges cost each test several seconds of two cores. A test that only damages, checks or
reads such a store starts from a copy of one built by the first test that asked for it, so each
test still gets its own folder, untouched by any other test, in the state the build left it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from tests.support.cli import Cli

# How a template is built: `build(cli, folder)` fills cli's store; files the store refers to
# (a document's source) go in `folder`, which lives as long as the worker's run.
Build = Callable[[Cli, Path], None]


class StoreTemplates:
    """A test worker's built stores, by name, under one folder of its temporary files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def copy_into(self, cli: Cli, name: str, build: Build) -> None:
        """Give cli's store the contents of template `name`, building it on first use.

        The build runs against cli itself (its home, its warm start), then its store is copied
        aside before the test goes on, so the template is the store as the build left it."""
        template = self.folder / name
        store = template / "store"
        if not store.is_dir():
            sources = template / "sources"
            sources.mkdir(parents=True, exist_ok=True)
            build(cli, sources)
            # The processes that wrote it have exited: the folder is a closed store.
            shutil.copytree(cli.store_path, store)
            return
        if cli.store_path.exists():
            raise AssertionError(f"{cli.store_path} already exists: a template is copied into a new store")
        shutil.copytree(store, cli.store_path)
