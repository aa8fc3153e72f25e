# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A container image reference, parsed and judged (controller only, pure); an archive's checksum.

Groundwork for running Ray from a container image (issue 43, docs/CONTAINERS.md): nothing calls it
yet. A reference is ``registry/name[:tag][@sha256:<64 hex>]``, the registry always named (Debian's
Podman has no search registries, and a short name is resolved differently by Podman and Docker).
Nodes must run the same image, so a reference must pin it by digest: a tag alone (``:latest`` when
there is none) can move between two nodes' pulls, and is refused unless the caller allows it. A
reference with both keeps the tag as a note and runs the digest: ``reference`` is always what to
pass to the engine (Skopeo 1.9 refuses a reference with both: "Docker references with both a tag
and digest are currently not supported").
"""

from __future__ import annotations

import hashlib
import re

# The grammar of the distribution reference (github.com/distribution/reference), digests sha256 only.
_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(r"^(?:%s(?:\.%s)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$" % (_HOST_PART, _HOST_PART))
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
NAME_MAX = 255
_READ = 1024 * 1024


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
