# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Ray node labels: their syntax, raygate's labels file, and the health labels of a node that passed the gate.

Syntax, as Ray 2.60 checks it (``ray._private.label_utils``, Kubernetes' rules): a key is an
optional prefix and ``/``, then a name. A name, and a value that is not empty, is at most 63
characters, begins and ends with a letter or digit and has only letters, digits, ``-``, ``_`` and
``.`` between. A prefix is at most 253 characters of dot-separated parts of that form (checked a
little more strictly here than Ray does: no empty part). Values are strings; ``ray.io/`` is Ray's.

Ray cannot change the labels of a running node (2.60 has no RPC for it; a node registers its
labels with the GCS once, when it starts). So labels that describe the node's state rather than its
configuration (status labels) are what it was started with, and raygate's labels file remembers
which keys they were, in a comment that Ray's YAML parser skips.

Selectors (``label_selector`` of ``@ray.remote`` and ``.options()``) know ``v``, ``!v``,
``in(a,b)`` and ``!in(a,b)``, nothing numeric: a job finds nodes checked lately by their check date.
Ray 2.60 compares the values of ``in()`` literally, spaces included (``in(a, b)`` never matches
``b``), so ``in_selector`` joins them with a bare comma.
"""

from __future__ import annotations

import datetime
import json
import re

PREFIX = "raygate.io/"
HEALTH = PREFIX + "health"
CHECKED_AT = PREFIX + "checked-at"
CHECKED_DATE = PREFIX + "checked-date"
FINGERPRINT = PREFIX + "fingerprint"
RAY_PREFIX = "ray.io/"

_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
_PREFIX_PART = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?")
FILE_HEADER = "# Managed by raygate.cluster.ray_node: local changes are overwritten."
STATUS_KEYS_PREFIX = "# raygate-status-labels: "


def key_error(key):
    """Why ``key`` is no Ray label key, or None."""
    if not isinstance(key, str):
        return "a key must be a string"
    prefix, slash, name = key.rpartition("/")
    if slash:
        parts = prefix.split(".")
        if len(prefix) > 253 or not all(_PREFIX_PART.fullmatch(part) for part in parts):
            return "its prefix %r is not dot-separated DNS labels of at most 253 characters in all" % prefix
    if not _NAME.fullmatch(name):
        return (
            "its name %r is not 1 to 63 letters, digits, '-', '_' or '.' beginning and ending with a letter or digit"
            % name
        )
    return None


def value_error(value):
    """Why ``value`` (a string) is no Ray label value, or None. The empty value is allowed."""
    if value and not _NAME.fullmatch(value):
        return "%r is not up to 63 letters, digits, '-', '_' or '.' beginning and ending with a letter or digit" % value
    return None


def check(labels, option, reserved_ok=True):
    """``labels`` with every value as a string; raises ValueError naming each bad label.

    Integers become their text (templated numbers arrive as integers); other non-strings are
    refused, as Ray refuses them. With ``reserved_ok`` false, keys under ``ray.io/`` are refused.
    """
    clean, problems = {}, []
    for key in sorted(labels or {}, key=str):
        value = labels[key]
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        why = key_error(key)
        if why is None and not reserved_ok and key.startswith(RAY_PREFIX):
            why = "the prefix %s is Ray's own" % RAY_PREFIX
        if why is None:
            why = value_error(value) if isinstance(value, str) else "its value must be a string, not %r" % (value,)
        if why:
            problems.append("%s: %s" % (key, why))
        else:
            clean[key] = value
    if problems:
        raise ValueError("invalid Ray node label in %s: %s" % (option, "; ".join(problems)))
    return clean


def merge(labels, status):
    """The labels a node starts with; a status label may not replace a configured one (ValueError)."""
    both = sorted(set(labels) & set(status))
    if both:
        raise ValueError(
            "%s in both labels and status_labels: a status label describes the node's state and may not "
            "replace a label of its configuration; rename one of them" % ", ".join(both)
        )
    return dict(labels, **status)


def render_file(labels, status_keys):
    """The labels file: JSON (which Ray reads as YAML) after a comment naming the status labels."""
    keys = json.dumps(sorted(status_keys), separators=(",", ":"))
    body = json.dumps(labels, sort_keys=True, indent=2)
    return "%s\n%s%s\n%s\n" % (FILE_HEADER, STATUS_KEYS_PREFIX, keys, body)


def parse_file(text):
    """(every label, the status labels) of a labels file; ({}, {}) for no file or one that is not
    a JSON mapping (raygate writes JSON; a file from before status labels has no comment: no status)."""
    keys, body = [], []
    for line in (text or "").splitlines():
        if line.startswith(STATUS_KEYS_PREFIX):
            try:
                keys = json.loads(line[len(STATUS_KEYS_PREFIX) :])
            except ValueError:
                keys = None
        elif not line.startswith("#"):
            body.append(line)
    try:
        labels = json.loads("\n".join(body))
    except ValueError:
        return {}, {}
    if not isinstance(labels, dict):
        return {}, {}
    if not isinstance(keys, list):
        keys = []
    return labels, dict((key, labels[key]) for key in keys if key in labels)


def status_from_file(text):
    """The status labels a labels file gave its node: {} for none, no file, or a file raygate did not write."""
    return parse_file(text)[1]


def utc_date(epoch):
    """``YYYY-MM-DD`` of a Unix time, in UTC."""
    return datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc).strftime("%Y-%m-%d")


def health(verdict, checked_at, fingerprint_hash=None):
    """The status labels of a node that passed the gate with ``verdict`` (pass or warn) at ``checked_at``."""
    labels = {HEALTH: str(verdict), CHECKED_AT: str(int(checked_at)), CHECKED_DATE: utc_date(checked_at)}
    if fingerprint_hash:
        labels[FINGERPRINT] = str(fingerprint_hash)
    return labels


def from_report(report, host, checked, fingerprint_hash=None):
    """The health labels of ``host`` when it was ``checked`` in this run and the gate's report
    (what ``raygate.cluster.health_report`` returns) lists it healthy, else {}.

    The verdict is ``warn`` for a host with warnings (healthy unless fail_on_warn), else ``pass``.
    A running member that was not checked again gets none: it keeps what it has. A tripped circuit
    breaker lists every host healthy; no host gets labels from such a report.
    """
    if not checked or not isinstance(report, dict) or report.get("checked_at") is None:
        return {}
    if report.get("breaker_tripped") or host not in (report.get("healthy") or []):
        return {}
    verdict = "warn" if host in (report.get("warned") or {}) else "pass"
    return health(verdict, report["checked_at"], fingerprint_hash)


def recent_dates(now, days=2):
    """The UTC dates of the last ``days`` days up to ``now`` (a Unix time), newest first."""
    return [utc_date(int(now) - 86400 * back) for back in range(days)]


def in_selector(values):
    """A Ray selector value matching any of ``values``: ``in(a,b)``, no spaces (Ray 2.60 keeps them)."""
    return "in(%s)" % ",".join(values)
