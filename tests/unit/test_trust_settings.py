"""Issue 23: a number past the largest float is out of range, not "a string"."""

from __future__ import annotations

import pytest

from ocat.config.loading import load_settings
from ocat.errors import ConfigError
from tests.support.cli import Cli


@pytest.mark.parametrize("written", ["1e309", "-1e309", "inf", "nan", ".inf", ".nan"])
def test_a_float_setting_that_is_no_finite_number_is_out_of_range(written: str) -> None:
    with pytest.raises(ConfigError, match=r"similarity_threshold must be a finite number, got \S+ \(out of range\)"):
        load_settings(env={}, overrides={"vector_store.similarity_threshold": written})


def test_a_number_written_as_yaml_reads_as_a_string_is_still_a_number() -> None:
    settings = load_settings(env={}, overrides={"vector_store.similarity_threshold": "6.5e-1"})
    assert settings.vector_store.similarity_threshold == 0.65


@pytest.mark.slow
def test_the_cli_names_the_number_and_the_range(cli: Cli) -> None:
    run = cli("--set", "vector_store.similarity_threshold=1e309", "--vector-store-stats")
    assert run.returncode == 3
    assert "similarity_threshold must be a finite number, got 1e309 (out of range)" in run.stderr
    assert "string" not in run.stderr
