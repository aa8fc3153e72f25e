# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""junit.xml: the health report (decision.py) as JUnit XML, one <testsuite> per node."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.raygate.cluster.plugins.plugin_utils.report.text import value_text

CLASS_PREFIX = "raygate.health."
# Characters XML 1.0 cannot carry at all, even escaped.
_XML_BAD = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text):
    return _XML_BAD.sub(lambda m: "\\x%02x" % ord(m.group(0)) if ord(m.group(0)) < 256 else "?", str(text))


def _junit_case(suite, host, check):
    case = ET.SubElement(suite, "testcase", classname=_xml(CLASS_PREFIX + host), name=_xml(check["name"]))
    body = "%s: %s\nvalue: %s\nthreshold: %s\nsource: %s" % (
        check["status"],
        check["detail"],
        value_text(check["value"]),
        value_text(check["threshold"]),
        check["source"],
    )
    if check.get("severity"):
        body += "\nseverity: %s\naction: %s" % (check["severity"], check.get("action", ""))
        props = ET.SubElement(case, "properties")
        for key in ("severity", "action"):
            ET.SubElement(props, "property", name=key, value=_xml(check.get(key, "")))
    if check["status"] == "fail":
        ET.SubElement(case, "failure", message=_xml(check["detail"]), type="fail").text = _xml(body)
    elif check["status"] == "skip":
        ET.SubElement(case, "skipped", message=_xml(check["detail"]))
    else:
        ET.SubElement(case, "system-out").text = _xml(body)


def render_junit(report):
    """junit.xml: one <testsuite> per node, one <testcase> per check; a skipped node is one skipped case."""
    stamp = report["checked_at"].rstrip("Z")
    root = ET.Element("testsuites", name="raygate.health")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for entry in report["nodes"]:
        host = entry["host"]
        suite = ET.SubElement(root, "testsuite", name=_xml(host), hostname=_xml(host), timestamp=stamp)
        props = ET.SubElement(suite, "properties")
        for key in ("role", "verdict", "severity", "address", "skip_reason"):
            if entry[key] is not None:
                ET.SubElement(props, "property", name=key, value=_xml(entry[key]))
        if entry["status"] == "skipped":
            case = ET.SubElement(suite, "testcase", classname=_xml(CLASS_PREFIX + host), name="node")
            ET.SubElement(case, "skipped", message=_xml(entry["skip_reason"] or "not re-checked"))
            counts = {"tests": 1, "failures": 0, "skipped": 1}
        else:
            for check in entry["checks"]:
                _junit_case(suite, host, check)
            statuses = [c["status"] for c in entry["checks"]]
            counts = {"tests": len(statuses), "failures": statuses.count("fail"), "skipped": statuses.count("skip")}
        for key, count in counts.items():
            suite.set(key, str(count))
            totals[key] += count
        suite.set("errors", "0")
    for key, count in totals.items():
        root.set(key, str(count))
    root.set("errors", "0")
    if hasattr(ET, "indent"):  # Python 3.9+ (this renders on the controller)
        ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
