# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A container image reference, parsed and judged (pure); an archive's checksum and contents.

Used by ray_install's container runtime on the node (issue 43, docs/CONTAINERS.md) and, through a
re-export of the same name, by controller code. A reference is
``registry/name[:tag][@sha256:<64 hex>]``, the registry always named (Debian's Podman has no search
registries, and a short name is resolved differently by Podman and Docker). Nodes must run the same
image, so a reference must pin it by digest: a tag alone (``:latest`` when there is none) can move
between two nodes' pulls, and is refused unless the caller allows it. A reference with both keeps
the tag as a note and runs the digest: ``reference`` is always what to pass to the engine (Skopeo
1.9 refuses a reference with both: "Docker references with both a tag and digest are currently not
supported"). An OCI archive is checked against a digest by streaming it once through hashlib.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile

# The grammar of the distribution reference (github.com/distribution/reference), digests sha256 only.
_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(r"^(?:%s(?:\.%s)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$" % (_HOST_PART, _HOST_PART))
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
NAME_MAX = 255
_READ = 1024 * 1024
_BLOB = re.compile(r"^blobs/sha256/([0-9a-f]{64})$")
# Manifests, indexes and configs are kilobytes: a blob up to this size is kept to be read as JSON,
# a bigger one (a layer) is only hashed as it streams by.
_KEEP = 4 * 1024 * 1024
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


class ImageRefError(ValueError):
    """A reference, digest or checksum that cannot be used; the message names the value and the fix."""


def find_digest_hint(repository, tag):
    """How to find the digest of ``repository:tag``: the registry's, which is what the nodes pull."""
    return (
        "find it with: skopeo inspect --format '{{.Digest}}' docker://%s:%s (or podman image inspect "
        "--format '{{.Digest}}' %s:%s where that image was pulled from the registry; the digest of an "
        "image built locally is not the one its registry serves)" % (repository, tag, repository, tag)
    )


def check_digest(value, what="digest"):
    """``value`` if it is ``sha256:`` and 64 lowercase hex digits, else ImageRefError naming it."""
    if not isinstance(value, str):
        raise ImageRefError("%s %r is not a string: write sha256:<64 hex digits>" % (what, value))
    algorithm, sep, encoded = value.partition(":")
    if not sep:
        raise ImageRefError("%s %r has no algorithm: write sha256:%s" % (what, value, value))
    if algorithm != "sha256":
        raise ImageRefError("%s %r: only sha256 digests are taken, not %r" % (what, value, algorithm))
    if _HEX64.match(encoded):
        return value
    if _HEX64.match(encoded.lower()):
        raise ImageRefError("%s %r: write the hex digits in lowercase (sha256:%s)" % (what, value, encoded.lower()))
    raise ImageRefError(
        "%s %r: a sha256 digest is 64 hex digits (0-9, a-f) after 'sha256:', this one has %d characters"
        % (what, value, len(encoded))
    )


def _split(value):
    """(registry, path, tag or None, digest or None) of a reference, checked part by part."""
    rest, at, digest = value.partition("@")
    if at:
        check_digest(digest, "the digest of image %r" % value)
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    tag = None
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            raise ImageRefError(
                "image %r: tag %r is not a tag (letters, digits, '_', '.', '-'; at most 128, not starting "
                "with '.' or '-')" % (value, tag)
            )
    first, sep, path = rest.partition("/")
    if not sep or not (first == "localhost" or "." in first or ":" in first or first.startswith("[")):
        raise ImageRefError(
            "image %r names no registry: write it in full, e.g. docker.io/%s, or the registry that serves "
            "it (a short name is looked up differently by Podman and Docker, and Debian's Podman has no "
            "search registries)" % (value, rest if "/" in rest else "library/" + rest)
        )
    if not _REGISTRY.match(first):
        raise ImageRefError("image %r: %r is not a registry host[:port]" % (value, first))
    for component in path.split("/"):
        if not _COMPONENT.match(component):
            raise ImageRefError(
                "image %r: %r is not a repository name component (lowercase letters and digits, "
                "separated by '.', '_', '__' or '-')" % (value, component)
            )
    if len(rest) > NAME_MAX:
        raise ImageRefError("image %r: the name is %d characters, at most %d" % (value, len(rest), NAME_MAX))
    return first, path, tag, (digest if at else None)


def parse_image_ref(value):
    """The parts of ``value`` (``registry/name[:tag][@sha256:<hex>]``) as a dict: registry, name (the
    path in the registry), repository (registry/name), tag (None when not given), digest (None when
    not given), pinned (a digest is given) and reference (what the engine runs: repository@digest,
    else repository:tag, tag ``latest`` when none). ImageRefError when it is malformed."""
    if not isinstance(value, str) or not value:
        raise ImageRefError("image %r: write a reference, registry/name@sha256:<64 hex digits>" % (value,))
    if value != value.strip() or any(c.isspace() for c in value):
        raise ImageRefError("image %r contains white space" % value)
    if "://" in value:
        raise ImageRefError("image %r: leave out the transport (%s)" % (value, value.split("://", 1)[0] + "://"))
    registry, name, tag, digest = _split(value)
    repository = "%s/%s" % (registry, name)
    return {
        "registry": registry,
        "name": name,
        "repository": repository,
        "tag": tag,
        "digest": digest,
        "pinned": digest is not None,
        "reference": "%s@%s" % (repository, digest) if digest else "%s:%s" % (repository, tag or "latest"),
    }


def check_image_ref(value, allow_tag=False, option="raygate_image"):
    """parse_image_ref, and refuse a reference without a digest unless ``allow_tag``: the message
    names ``option`` and its value, how to pin it, and how to find the digest."""
    ref = parse_image_ref(value)
    if ref["pinned"] or allow_tag:
        return ref
    implied = "" if ref["tag"] else " (none given: latest)"
    hint = find_digest_hint(ref["repository"], ref["tag"] or "latest")
    raise ImageRefError(
        "%s %r names a tag%s and no digest: a tag can move, and nodes pulling it at different times "
        "would run different images. Pin it: %s@sha256:<digest>; %s. Or accept the tag with "
        "%s_allow_tag: true." % (option, value, implied, ref["repository"], hint, option)
    )


def parse_checksum(value):
    """The 64 lowercase hex digits of a sha256 checksum given as ``sha256:<hex>`` or bare hex."""
    if not isinstance(value, str):
        raise ImageRefError("checksum %r is not a string: write sha256:<64 hex digits>" % (value,))
    text = value.strip()
    hexpart = text[len("sha256:") :] if text.lower().startswith("sha256:") else text
    if ":" in hexpart:
        raise ImageRefError("checksum %r: only sha256 is taken (sha256:<64 hex digits>, or the digits alone)" % value)
    if not _HEX64.match(hexpart.lower()):
        raise ImageRefError(
            "checksum %r: a sha256 checksum is 64 hex digits, this one has %d characters (sha256sum FILE prints it)"
            % (value, len(hexpart))
        )
    return hexpart.lower()


def file_sha256(path):
    """The sha256 of the file at ``path``, as 64 lowercase hex digits, read in pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_READ), b""):
            digest.update(block)
    return digest.hexdigest()


def check_archive_checksum(path, checksum):
    """``sha256:<hex>`` of the file at ``path`` when it is ``checksum`` (``sha256:<hex>`` or bare
    hex), else ImageRefError naming the file, both values and what to do."""
    want = parse_checksum(checksum)
    try:
        got = file_sha256(path)
    except OSError as exc:
        raise ImageRefError("image archive %s cannot be read: %s" % (path, exc.strerror or exc)) from exc
    if got != want:
        raise ImageRefError(
            "image archive %s: its sha256 is %s, the checksum given is %s: it is not the archive that was "
            "published (copy it again), or the checksum is another archive's" % (path, got, want)
        )
    return "sha256:" + got


def _stream_blob(fileobj, size):
    """(size, sha256 hex, the bytes when small enough to be a manifest or config, else None)."""
    digest, kept = hashlib.sha256(), [] if size <= _KEEP else None
    for block in iter(lambda: fileobj.read(_READ), b""):
        digest.update(block)
        if kept is not None:
            kept.append(block)
    return size, digest.hexdigest(), b"".join(kept) if kept is not None else None


def _archive_members(path):
    """index.json's bytes (None when there is none) and {hex name: _stream_blob(...)} of the tar at
    ``path``, read once from start to end."""
    index, blobs = None, {}
    try:
        with tarfile.open(path, "r|") as tar:
            for member in tar:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if not member.isfile():
                    continue
                if name == "index.json":
                    index = tar.extractfile(member).read(_KEEP)
                elif _BLOB.match(name):
                    blobs[_BLOB.match(name).group(1)] = _stream_blob(tar.extractfile(member), member.size)
    except (OSError, tarfile.TarError) as exc:
        raise ImageRefError("image archive %s is not an OCI archive (a tar file): %s" % (path, exc)) from exc
    return index, blobs


def _check_descriptor(path, descriptor, blobs, parent):
    """The blob ``descriptor`` names is in the archive with its size; its JSON when it has some."""
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    check_digest(digest, "image archive %s: a digest %s names" % (path, parent))
    blob = blobs.get(digest[len("sha256:") :])
    if blob is None:
        raise ImageRefError("image archive %s lacks the blob %s that %s names (incomplete)" % (path, digest, parent))
    if "size" in descriptor and descriptor["size"] != blob[0]:
        raise ImageRefError(
            "image archive %s: the blob %s has %d bytes, %s says %s: it is damaged or incomplete; copy it again"
            % (path, digest, blob[0], parent, descriptor["size"])
        )
    return blob[2]


def _check_tree(path, digest, blobs, parent="index.json"):
    """Every blob the manifest (or index) ``digest`` names, down to the layers, is in the archive."""
    raw = _check_descriptor(path, {"digest": digest}, blobs, parent)
    try:
        content = json.loads(raw.decode("utf-8")) if raw is not None else None
    except ValueError:
        content = None
    if not isinstance(content, dict):
        raise ImageRefError("image archive %s: %s is not a manifest (JSON), not an image's archive" % (path, digest))
    if content.get("mediaType") in _INDEX_TYPES or "manifests" in content:
        for child in content.get("manifests") or []:
            _check_tree(path, (child or {}).get("digest"), blobs, "the index %s" % digest)
        return
    for descriptor in [content.get("config")] + list(content.get("layers") or []):
        _check_descriptor(path, descriptor, blobs, "the manifest %s" % digest)


def check_oci_archive(path, digest=None):
    """Check the OCI archive (an OCI image layout in a tar) at ``path`` against the manifest digest
    ``digest`` without unpacking it: its index.json names ``digest``, every blob hashes to its name,
    and every blob the manifest names is there with its size. ImageRefError naming the file and the
    digests found. Without ``digest`` (a tag allowed), every manifest index.json names is checked."""
    index_raw, blobs = _archive_members(path)
    if index_raw is None:
        raise ImageRefError(
            "image archive %s has no index.json: it is not an OCI archive (a docker-archive, podman save's "
            "default, keeps no registry digest); make one with skopeo copy docker://REPOSITORY@DIGEST "
            "oci-archive:FILE" % path
        )
    try:
        named = [m.get("digest") for m in json.loads(index_raw.decode("utf-8")).get("manifests") or []]
    except (ValueError, AttributeError) as exc:
        raise ImageRefError("image archive %s: its index.json is not an OCI index: %s" % (path, exc)) from exc
    if digest is not None and digest not in named:
        raise ImageRefError(
            "image archive %s holds %s, not the image's digest %s: it is another image's archive (check "
            "image_archive and image)" % (path, ", ".join(map(str, named)) or "no manifest", digest)
        )
    altered = sorted("sha256:%s hashes to sha256:%s" % (name, b[1]) for name, b in blobs.items() if b[1] != name)
    if altered:
        raise ImageRefError(
            "image archive %s was altered or damaged: blob %s; copy it again from where it was published"
            % (path, "; blob ".join(altered))
        )
    for manifest in [digest] if digest is not None else named:
        _check_tree(path, manifest, blobs)
    return digest
