import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.node.versions import (
    RAY_VERSION_RE,
    format_table,
    mismatches,
    python_key,
)


def test_all_equal_is_no_mismatch():
    infos = {h: {"ray": "2.60.0", "python": "3.11.2"} for h in ("node1", "node2", "node3")}
    assert mismatches(infos, reference="node1") == []


def test_python_patch_difference_is_a_mismatch_at_patch_level():
    # ray#44063: 3.10.12 vs 3.10.13 is refused by Ray's default check.
    infos = {"node1": {"ray": "2.60.0", "python": "3.10.12"}, "node2": {"ray": "2.60.0", "python": "3.10.13"}}
    rows = mismatches(infos, level="patch", reference="node1")
    assert [r["host"] for r in rows] == ["node1", "node2"]
    assert rows[1]["differs"] == ["python"]
    assert rows[0]["differs"] == []


def test_python_patch_difference_passes_at_minor_level():
    infos = {"node1": {"ray": "2.60.0", "python": "3.10.12"}, "node2": {"ray": "2.60.0", "python": "3.10.13"}}
    assert mismatches(infos, level="minor", reference="node1") == []


def test_ray_difference_and_reference_first():
    infos = {"a": {"ray": "2.59.0", "python": "3.11.2"}, "head": {"ray": "2.60.0", "python": "3.11.2"}}
    rows = mismatches(infos, reference="head")
    assert rows[0]["host"] == "head"
    assert rows[1] == {"host": "a", "ray": "2.59.0", "python": "3.11.2", "differs": ["ray"]}


def test_unknown_level_is_an_error():
    with pytest.raises(ValueError, match="python_version_match_level"):
        mismatches({"a": {"ray": "1", "python": "3"}}, level="major")


def test_table_names_every_host_and_the_level():
    infos = {"node1": {"ray": "2.60.0", "python": "3.11.2"}, "node2": {"ray": "2.60.0", "python": "3.11.4"}}
    table = format_table(mismatches(infos, reference="node1"), "patch")
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["host", "ray", "python"]
    assert lines[1].split() == ["node1", "2.60.0", "3.11.2", "-"]
    assert lines[2].split() == ["node2", "2.60.0", "3.11.4", "python"]
    assert "patch level" in lines[-1]


@pytest.mark.parametrize(
    "version,ok",
    [("2.60.0", True), ("2.52.0rc1", True), ("2.60", False), ("latest", False), ("2.60.0; rm -rf /", False)],
)
def test_exact_version_pattern(version, ok):
    assert bool(RAY_VERSION_RE.match(version)) is ok


def test_python_key():
    assert python_key("3.11.7", "patch") == "3.11.7"
    assert python_key("3.11.7", "minor") == "3.11"


IMG_A = "sha256:" + "a" * 64
IMG_B = "sha256:" + "b" * 64


def test_a_node_with_another_image_differs_in_image():
    infos = {
        "head": {"ray": "2.60.0", "python": "3.11.2", "image": IMG_A},
        "n1": {"ray": "2.60.0", "python": "3.11.2", "image": IMG_A},
        "n2": {"ray": "2.60.0", "python": "3.11.2", "image": IMG_B},
    }
    rows = mismatches(infos, reference="head")
    assert [(r["host"], r["image"], r["differs"]) for r in rows] == [
        ("head", IMG_A, []),
        ("n1", IMG_A, []),
        ("n2", IMG_B, ["image"]),
    ]
    assert mismatches(dict(infos, n2=infos["n1"]), reference="head") == []


def test_a_node_without_an_image_differs_from_one_with_one():
    # A virtualenv node among container nodes runs other software, even at the same versions.
    infos = {"head": {"ray": "2.60.0", "python": "3.11.2", "image": IMG_A}, "n1": {"ray": "2.60.0", "python": "3.11.2"}}
    rows = mismatches(infos, reference="head")
    assert rows[1] == {"host": "n1", "ray": "2.60.0", "python": "3.11.2", "image": None, "differs": ["image"]}


def test_the_table_has_an_image_column_only_when_an_info_has_an_image():
    infos = {
        "node1": {"ray": "2.60.0", "python": "3.11.2", "image": IMG_A},
        "node2": {"ray": "2.60.0", "python": "3.11.4", "image": IMG_B},
    }
    lines = format_table(mismatches(infos, reference="node1"), "patch").splitlines()
    assert lines[0].split()[:4] == ["host", "ray", "python", "image"]
    assert lines[1].split() == ["node1", "2.60.0", "3.11.2", IMG_A, "-"]
    assert lines[2].split() == ["node2", "2.60.0", "3.11.4", IMG_B, "python,", "image"]
    venv = {h: {k: v for k, v in info.items() if k != "image"} for h, info in infos.items()}
    assert "image" not in format_table(mismatches(venv, reference="node1")).splitlines()[0]
