"""The names the raygate role gives the controller's plugins for what a node's run leaves
(``raygate_answers`` in roles/_common/vars/main.yml): the tests pass the role's own mapping, so a
name changed on one side only fails here."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with open(os.path.join(ROOT, "roles", "_common", "vars", "main.yml")) as _fh:
    ANSWERS = yaml.safe_load(_fh)["raygate_answers"]
