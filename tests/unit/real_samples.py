"""The real, publicly posted tool outputs in ../shared/samples, which the parser tests read in place
(they are never copied into the project). tests/conftest.py says loudly when the folder is missing."""

import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLES = os.path.join(REPO, "..", "shared", "samples")

needs_samples = pytest.mark.skipif(
    not os.path.isdir(SAMPLES), reason="../shared/samples is missing: the real-output tests did not run"
)


def sample(name):
    with open(os.path.join(SAMPLES, name), encoding="utf-8") as fh:
        return fh.read()
