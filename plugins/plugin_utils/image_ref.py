# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The image reference rules for controller code: they live in module_utils/node/image_ref.py,
where ray_install (a module, which can import only module_utils) uses them on the node too."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.node.image_ref import (
    ImageRefError,
    check_archive_checksum,
    check_digest,
    check_image_ref,
    file_sha256,
    find_digest_hint,
    parse_checksum,
    parse_image_ref,
)

__all__ = [
    "ImageRefError",
    "check_archive_checksum",
    "check_digest",
    "check_image_ref",
    "file_sha256",
    "find_digest_hint",
    "parse_checksum",
    "parse_image_ref",
]
