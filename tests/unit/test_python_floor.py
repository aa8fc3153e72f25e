"""Every plugin parses as Python 3.9, the oldest node Python tests/config.yml claims."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "plugins").rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_plugin_parses_as_python_3_9(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))


def test_the_floor_matches_the_content_config():
    assert 'python_requires: ">=3.9"' in (ROOT / "tests" / "config.yml").read_text()
