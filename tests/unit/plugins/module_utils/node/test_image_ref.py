"""Unit tests for image references and archive checksums (plugins/module_utils/node/image_ref.py)."""

import hashlib
import io
import tarfile

import pytest
from oci_layout import blob, image_blobs, write_archive

from ansible_collections.raygate.cluster.plugins.module_utils.node import image_ref as ir

HEX = "38e1ce550abfdf1b153f1c534f05f1ef72eff09f77ce8631274df90ca59d96dd"
DIGEST = "sha256:" + HEX


@pytest.mark.parametrize(
    "value, registry, name, tag",
    [
        ("127.0.0.1:5050/raygate/ray@" + DIGEST, "127.0.0.1:5050", "raygate/ray", None),
        ("registry.example.com/ml/ray:2.60.0@" + DIGEST, "registry.example.com", "ml/ray", "2.60.0"),
        ("docker.io/rayproject/ray:2.60.0-py311-gpu@" + DIGEST, "docker.io", "rayproject/ray", "2.60.0-py311-gpu"),
        ("localhost/raygate/ray@" + DIGEST, "localhost", "raygate/ray", None),
        ("localhost:5000/a/b/c__d.e-f@" + DIGEST, "localhost:5000", "a/b/c__d.e-f", None),
        ("[fd00::1]:5000/raygate/ray@" + DIGEST, "[fd00::1]:5000", "raygate/ray", None),
    ],
)
def test_a_pinned_reference_gives_its_parts_and_runs_the_digest(value, registry, name, tag):
    ref = ir.check_image_ref(value)
    assert (ref["registry"], ref["name"], ref["tag"], ref["digest"]) == (registry, name, tag, DIGEST)
    assert ref["repository"] == "%s/%s" % (registry, name)
    assert ref["pinned"] is True
    # A tag next to the digest is a note: the engine is given the digest alone.
    assert ref["reference"] == "%s/%s@%s" % (registry, name, DIGEST)


def test_a_tag_alone_is_refused_naming_the_value_the_pin_and_how_to_find_the_digest():
    with pytest.raises(ir.ImageRefError) as err:
        ir.check_image_ref("127.0.0.1:5050/raygate/ray:2.60.0-bookworm")
    text = str(err.value)
    assert "raygate_image '127.0.0.1:5050/raygate/ray:2.60.0-bookworm' names a tag and no digest" in text
    assert "Pin it: 127.0.0.1:5050/raygate/ray@sha256:<digest>" in text
    assert "skopeo inspect --format '{{.Digest}}' docker://127.0.0.1:5050/raygate/ray:2.60.0-bookworm" in text
    assert "podman image inspect" in text
    assert "raygate_image_allow_tag: true" in text


def test_no_tag_and_no_digest_is_latest_and_refused_so():
    with pytest.raises(ir.ImageRefError, match=r"names a tag \(none given: latest\)") as err:
        ir.check_image_ref("docker.io/rayproject/ray", option="image")
    assert "docker://docker.io/rayproject/ray:latest" in str(err.value)
    assert "image_allow_tag: true" in str(err.value)


def test_a_tag_is_taken_when_allowed_and_runs_as_the_tag():
    ref = ir.check_image_ref("docker.io/rayproject/ray:2.60.0", allow_tag=True)
    assert (ref["tag"], ref["digest"], ref["pinned"]) == ("2.60.0", None, False)
    assert ref["reference"] == "docker.io/rayproject/ray:2.60.0"
    latest = ir.check_image_ref("docker.io/rayproject/ray", allow_tag=True)
    assert latest["reference"] == "docker.io/rayproject/ray:latest"


def test_parsing_alone_judges_no_pin():
    assert ir.parse_image_ref("quay.io/org/ray:x")["pinned"] is False


@pytest.mark.parametrize(
    "digest, message",
    [
        ("sha256:" + HEX[:-1], "64 hex digits .* this one has 63 characters"),
        ("sha256:" + HEX + "0", "this one has 65 characters"),
        ("sha256:" + HEX[:-1] + "g", "64 hex digits"),
        ("sha256:" + HEX.upper(), "lowercase \\(sha256:%s\\)" % HEX),
        ("sha512:" + HEX + HEX, "only sha256 digests are taken, not 'sha512'"),
        (HEX, "has no algorithm: write sha256:" + HEX),
        ("sha256:", "this one has 0 characters"),
    ],
)
def test_a_malformed_digest_is_refused_naming_it(digest, message):
    with pytest.raises(ir.ImageRefError, match=message) as err:
        ir.check_image_ref("127.0.0.1:5050/raygate/ray@" + digest)
    assert digest in str(err.value)


@pytest.mark.parametrize(
    "value, message",
    [
        ("ray@" + DIGEST, "names no registry: write it in full, e.g. docker.io/library/ray"),
        ("rayproject/ray:2.60.0", "names no registry: write it in full, e.g. docker.io/rayproject/ray"),
        ("docker://docker.io/rayproject/ray@" + DIGEST, "leave out the transport \\(docker://\\)"),
        ("docker.io/RayProject/ray@" + DIGEST, "'RayProject' is not a repository name component"),
        ("docker.io/ray-/x@" + DIGEST, "'ray-' is not a repository name component"),
        ("docker.io//ray@" + DIGEST, "'' is not a repository name component"),
        ("docker.io/ray:.bad", "tag '.bad' is not a tag"),
        ("docker.io/ray:" + "a" * 129, "is not a tag"),
        ("bad_host.io/ray@" + DIGEST, "'bad_host.io' is not a registry"),
        ("docker.io/ray @" + DIGEST, "contains white space"),
        ("", "write a reference"),
        (None, "write a reference"),
        ("docker.io/" + "a" * 250, "the name is 260 characters, at most 255"),
    ],
)
def test_a_malformed_reference_is_refused_saying_why(value, message):
    with pytest.raises(ir.ImageRefError, match=message):
        ir.parse_image_ref(value)


def test_check_digest_alone():
    assert ir.check_digest(DIGEST) == DIGEST
    with pytest.raises(ir.ImageRefError, match="the pin 3 is not a string"):
        ir.check_digest(3, "the pin")


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "ray.oci.tar"
    path.write_bytes(b"not really a tar" * 100000)
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("form", ["sha256:%s", "%s", "SHA256:%s", "  sha256:%s\n"])
def test_an_archive_matching_its_checksum_gives_its_digest(archive, form):
    path, hexdigest = archive
    given = form % (hexdigest.upper() if form.startswith("SHA") else hexdigest)
    assert ir.check_archive_checksum(path, given) == "sha256:" + hexdigest
    assert ir.file_sha256(path) == hexdigest


def test_an_archive_not_matching_is_refused_naming_both_values(archive):
    path, hexdigest = archive
    with pytest.raises(ir.ImageRefError) as err:
        ir.check_archive_checksum(path, DIGEST)
    text = str(err.value)
    assert path in text and hexdigest in text and HEX in text
    assert "not the archive that was published" in text


def test_a_missing_archive_is_named(tmp_path):
    missing = str(tmp_path / "nope.tar")
    with pytest.raises(ir.ImageRefError, match="image archive %s cannot be read: No such file" % missing):
        ir.check_archive_checksum(missing, HEX)


@pytest.mark.parametrize(
    "checksum, message",
    [
        (HEX[:10], "64 hex digits, this one has 10 characters"),
        ("md5:" + HEX, "only sha256 is taken"),
        ("sha256:" + "z" * 64, "64 hex digits"),
        (None, "is not a string"),
    ],
)
def test_a_malformed_checksum_is_refused_before_reading_the_file(checksum, message):
    with pytest.raises(ir.ImageRefError, match=message):
        ir.check_archive_checksum("/nonexistent/archive.tar", checksum)


# -- an OCI archive against a digest -----------------------------------------------------------


def test_a_whole_oci_archive_holding_the_digest_passes(tmp_path):
    blobs, digest = image_blobs()
    write_archive(tmp_path / "a.tar", blobs, [digest])
    assert ir.check_oci_archive(str(tmp_path / "a.tar"), digest) == digest
    assert ir.check_oci_archive(str(tmp_path / "a.tar")) is None  # a tag allowed: every named manifest checked


def test_an_archive_of_another_image_names_the_digests_it_holds(tmp_path):
    blobs, digest = image_blobs()
    other, other_digest = image_blobs(b"another layer")
    write_archive(tmp_path / "a.tar", other, [other_digest])
    with pytest.raises(ir.ImageRefError) as err:
        ir.check_oci_archive(str(tmp_path / "a.tar"), digest)
    assert "holds %s, not the image's digest %s" % (other_digest, digest) in str(err.value)


def test_a_tampered_blob_is_named_with_what_it_hashes_to(tmp_path):
    blobs, digest = image_blobs()
    layer_hex = [h for h, data in blobs.items() if data == b"a layer's bytes"][0]
    write_archive(tmp_path / "a.tar", blobs, [digest], replace={layer_hex: b"a layer's bytez"})
    with pytest.raises(ir.ImageRefError) as err:
        ir.check_oci_archive(str(tmp_path / "a.tar"), digest)
    text = str(err.value)
    got = blob(b"a layer's bytez")[0]
    assert "was altered or damaged: blob sha256:%s hashes to %s" % (layer_hex, got) in text


def test_a_blob_the_manifest_names_missing_is_found(tmp_path):
    blobs, digest = image_blobs()
    layer_hex = [h for h, data in blobs.items() if data == b"a layer's bytes"][0]
    write_archive(tmp_path / "a.tar", blobs, [digest], drop=[layer_hex])
    with pytest.raises(ir.ImageRefError) as err:
        ir.check_oci_archive(str(tmp_path / "a.tar"), digest)
    assert "lacks the blob sha256:%s that the manifest %s names" % (layer_hex, digest) in str(err.value)


def test_a_docker_archive_or_no_tar_at_all_is_refused(tmp_path):
    with tarfile.open(tmp_path / "docker.tar", "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ir.ImageRefError, match="has no index.json: it is not an OCI archive .*skopeo copy"):
        ir.check_oci_archive(str(tmp_path / "docker.tar"), DIGEST)
    (tmp_path / "text").write_text("not a tar\n")
    with pytest.raises(ir.ImageRefError, match="is not an OCI archive \\(a tar file\\)"):
        ir.check_oci_archive(str(tmp_path / "text"), DIGEST)
