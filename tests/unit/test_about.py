"""kafkaio.about and ``kafkaio --version``: what this installation is made of."""

from __future__ import annotations

import platform

import pytest

import kafkaio
import kafkaio.about as about
from kafkaio.cli import main
from kafkaio.records import COMPILED


def test_the_report_names_version_codec_python_and_features() -> None:
    lines = about.installation().lines()
    assert lines[0] == f"kafkaio {kafkaio.__version__}"
    assert lines[1] == f"record codec: {'compiled (mypyc)' if COMPILED else 'pure Python'}"
    assert lines[2].startswith(f"python: {platform.python_version()} ")
    features = [line.strip().split(":")[0] for line in lines if line.startswith("  ")]
    assert features == list(about.OPTIONAL_FEATURES)


def test_a_missing_feature_says_what_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(about, "_version_of", lambda dist: None if dist == "pyspark" else "1.0")
    lines = about.installation().lines()
    assert "  Spark data source: no (kafkaio[spark])" in lines
    assert "  trio backend: yes (trio 1.0)" in lines


def test_the_pure_python_codec_is_pointed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(about, "record_codec", lambda: "pure Python")
    lines = about.installation().lines()
    assert lines[1] == "record codec: pure Python"
    assert lines[-1].startswith("note: the pure-Python record codec is several times slower")


def test_kafkaio_version_prints_the_report_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == about.installation().lines()
    assert err == ""
