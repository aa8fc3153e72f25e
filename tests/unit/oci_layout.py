"""Tiny OCI archives (an OCI image layout in a tar, as `skopeo copy ... oci-archive:F` writes) for the
unit tests of the archive check and of ray_install's container runtime."""

import hashlib
import io
import json
import tarfile


def blob(data):
    """(``sha256:<hex>`` of ``data``, its 64 hex digits)."""
    hexd = hashlib.sha256(data).hexdigest()
    return "sha256:" + hexd, hexd


def image_blobs(layer=b"a layer's bytes"):
    """{hex: bytes} of a one-layer image and its manifest digest."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers"}}).encode()
    config_digest, config_hex = blob(config)
    layer_digest, layer_hex = blob(layer)
    oci = "application/vnd.oci.image."
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": oci + "manifest.v1+json",
            "config": {"mediaType": oci + "config.v1+json", "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": oci + "layer.v1.tar+gzip", "digest": layer_digest, "size": len(layer)}],
        }
    ).encode()
    manifest_digest, manifest_hex = blob(manifest)
    return {config_hex: config, layer_hex: layer, manifest_hex: manifest}, manifest_digest


def write_archive(path, blobs, index_digests, replace=None, drop=()):
    """An OCI archive at ``path`` holding ``blobs`` ({hex: bytes}) with an index.json naming
    ``index_digests``; ``replace`` ({hex: bytes}) stores other bytes under a blob's name (tampering),
    ``drop`` leaves blobs out. The archive's sha256 hex."""
    replace = replace or {}
    index = {
        "schemaVersion": 2,
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": 1} for d in index_digests
        ],
    }
    files = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}', "index.json": json.dumps(index).encode()}
    for hexd, data in blobs.items():
        if hexd not in drop:
            files["blobs/sha256/" + hexd] = replace.get(hexd, data)
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()
