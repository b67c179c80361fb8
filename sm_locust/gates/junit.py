"""JUnit XML for CI systems: one <testsuite>, one <testcase> per gate, <failure> on a gate that fails the run.

The subset every JUnit consumer reads (GitHub, GitLab, Jenkins): testsuites/testsuite with name,
tests, failures, errors, skipped, time, timestamp; testcase with classname, name, time; failure
with message and type, and the gate's line in <system-out>: the same text the terminal prints
(observed value, interval, and for an inconclusive gate how much longer a run would decide it). An
inconclusive gate is a <failure type="GateInconclusive">, or, with `--inconclusive pass`, a passed
testcase whose <system-out> still says INCONCLUSIVE. Text that came from a run folder
(an endpoint name, an error code) is sanitised (`sm_locust.sanitize`): a control character is not
even valid XML 1.0, and a CI log shows these messages on a terminal.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from sm_locust.gates.gates import Verdict
from sm_locust.sanitize import clean


def to_junit_xml(verdicts: Sequence[Verdict], *, suite: str = "sm-locust smoke", time_s: float = 0.0,
                 timestamp: str = "", properties: dict[str, str] | None = None,
                 inconclusive_passes: bool = False) -> str:
    failures = sum(v.fails(inconclusive_passes) for v in verdicts)
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
        if verdict.fails(inconclusive_passes):
            kind = "GateInconclusive" if verdict.inconclusive else "GateFailed"
            failure = ET.SubElement(case, "failure", message=clean(verdict.line()), type=kind)
            failure.text = clean(verdict.message)
        out = ET.SubElement(case, "system-out")
        out.text = clean(verdict.line())
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
