"""Build an action plugin around a fake task, as Ansible would for one task (no connection used)."""

from unittest.mock import MagicMock


def plugin_for(action_module, name, args, check_mode=False):
    """An instance of ``action_module.ActionModule`` for a task of action ``name`` with ``args``."""
    task = MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.action = name
    connection = MagicMock()
    connection._shell.tmpdir = None
    plugin = action_module.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), None)
    # Set by the plugin loader; ansible-core < 2.19 names it in argument errors.
    plugin._load_name = name
    return plugin
