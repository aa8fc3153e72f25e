"""plugin_utils/image_ref.py hands controller code the rules of module_utils/node/image_ref.py
(tested there), the very same objects."""

from ansible_collections.raygate.cluster.plugins.module_utils.node import image_ref as node_side
from ansible_collections.raygate.cluster.plugins.plugin_utils import image_ref as controller


def test_controller_code_gets_the_same_rules():
    for name in ("ImageRefError", "check_image_ref", "parse_image_ref", "check_archive_checksum", "check_digest"):
        assert getattr(controller, name) is getattr(node_side, name), name
