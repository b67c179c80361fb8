"""JUnit XML for CI systems: one <testsuite>, one <testcase> per gate, <failure> on a failed gate.

The subset every JUnit consumer reads (GitHub, GitLab, Jenkins): testsuites/testsuite with name,
tests, failures, errors, skipped, time, timestamp; testcase with classname, name, time; failure
with message and type, and the observed value in <system-out>. Text that came from a run folder
(an endpoint name, an error code) is sanitised (`sm_locust.sanitize`): a control character is not
even valid XML 1.0, and a CI log shows these messages on a terminal.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from sm_locust.gates.gates import Verdict
from sm_locust.sanitize import clean


def to_junit_xml(verdicts: Sequence[Verdict], *, suite: str = "sm-locust smoke", time_s: float = 0.0,
                 timestamp: str = "", properties: dict[str, str] | None = None) -> str:
    failures = sum(not v.passed for v in verdicts)
    suite = clean(suite)
    root = ET.Element("testsuites", name=suite, tests=str(len(verdicts)), failures=str(failures), errors="0",
                      time=f"{time_s:.3f}")
    attrs = {"name": suite, "tests": str(len(verdicts)), "failures": str(failures), "errors": "0", "skipped": "0",
             "time": f"{time_s:.3f}"}
    if timestamp:
        attrs["timestamp"] = timestamp
    suite_el = ET.SubElement(root, "testsuite", attrs)
    if properties:
        props = ET.SubElement(suite_el, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=clean(key), value=clean(value))
    for verdict in verdicts:
        case = ET.SubElement(suite_el, "testcase", classname="sm_locust.gates", name=clean(verdict.gate), time="0")
        if not verdict.passed:
            failure = ET.SubElement(case, "failure", message=clean(verdict.message), type="GateFailed")
            failure.text = clean(verdict.message)
        out = ET.SubElement(case, "system-out")
        out.text = clean(f"observed {verdict.observed}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
