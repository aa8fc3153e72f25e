"""galaxy.yml, the changelog's releases and every plugin's version_added tell one story."""

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _v(text):
    return tuple(int(p) for p in str(text).split("."))


def _galaxy_version():
    return _v(yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"])


def _released():
    releases = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())["releases"] or {}
    return sorted(_v(v) for v in releases)


def _version_added():
    found = {}
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for m in re.finditer(r"^\s*version_added:\s*['\"]?([0-9.]+)", path.read_text(), re.M):
            found.setdefault(path.relative_to(ROOT).as_posix(), set()).add(_v(m.group(1)))
    return found


def test_galaxy_version_is_the_latest_release_or_the_next_one():
    released = _released()
    assert released, "changelogs/changelog.yaml has no release: cut one with antsibull-changelog release"
    assert _galaxy_version() >= released[-1]


def test_no_plugin_claims_a_version_newer_than_the_collection():
    galaxy = _galaxy_version()
    newer = {path: sorted(vs) for path, vs in _version_added().items() if max(vs) > galaxy}
    assert newer == {}, "version_added beyond galaxy.yml's %s" % (galaxy,)


def test_unreleased_plugins_claim_the_coming_version():
    """Everything added after the last release says it comes in galaxy.yml's version."""
    galaxy, last = _galaxy_version(), _released()[-1]
    if galaxy == last:
        return
    between = {path: sorted(vs) for path, vs in _version_added().items() if any(last < v < galaxy for v in vs)}
    assert between == {}, "version_added between the last release %s and the coming %s" % (last, galaxy)
