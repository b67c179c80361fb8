"""The one sanitiser (sm_locust/sanitize.py): terminal controls and bidi overrides escaped, lines bounded,
plain text untouched; and the places endpoint or file text passes through it (errors, failures, JUnit)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from sm_locust.errors import UsageError
from sm_locust.invocation import MAX_MESSAGE, InvocationError
from sm_locust.sanitize import ELLIPSIS, clean, is_clean, page_text

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;ZXZpbA==\x1b\\"
CSI_CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
BIDI = "\u202eevil\u202c \u2066x\u2069"


def test_plain_text_passes_unchanged():
    for text in ("ModelError: (original status 500) boom", "tab\there", "naïve 日本語 ✓ — “quotes”", ""):
        assert clean(text) == text


def test_every_terminal_control_and_bidi_override_is_escaped_visibly():
    hostile = f"a{OSC_TITLE}b{OSC_CLIPBOARD}c{CSI_CLEAR}d{C1_CSI}e{BIDI}\x00\x7f\r"
    out = clean(hostile)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\x00" not in out
    assert is_clean(out) and not is_clean(hostile)
    assert out.startswith("a\\x1b]0;pwned\\x07b\\x1b]52;c;")
    assert "\\u202eevil\\u202c" in out and "\\u2066x\\u2069" in out and out.endswith("\\x00\\x7f\\x0d")


def test_newlines_are_escaped_unless_allowed():
    assert clean("one\ntwo\r\nthree") == "one\\ntwo\\nthree"
    assert clean("one\ntwo\x1b[2J", newlines=True) == "one\ntwo\\x1b[2J"


def test_the_length_is_bounded_with_an_ellipsis():
    out = clean("x" * 4_300_000, 100)
    assert len(out) == 100 and out.endswith(ELLIPSIS)
    assert len(clean("\x1b" * 1000, 50)) == 50  # escaping cannot push it past the bound
    assert clean("y" * 100, 100) == "y" * 100
    assert len(clean("z" * 5000, None)) == 5000


def test_page_text_is_sanitised_then_html_escaped():
    expected = "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b]0;pwned\\x07"
    assert page_text(f"<script>alert(1)</script>{OSC_TITLE}") == expected


def test_an_error_line_is_sanitised_and_bounded_wherever_it_is_raised():
    err = UsageError(f"--traffic 'x.yaml': load.users must be a number, got {'[' * 10_000}{OSC_TITLE}")
    assert "\x1b" not in str(err) and len(str(err)) <= 1000 and str(err).endswith(ELLIPSIS)
    assert err._render_traceback_() == [f"UsageError: {err.message}"]


def test_an_endpoints_failure_text_is_sanitised_before_locust_sees_it():
    failure = InvocationError(f"ModelError{OSC_TITLE}", f"(original status 500) {CSI_CLEAR}{OSC_CLIPBOARD}{BIDI}")
    assert is_clean(str(failure)) and is_clean(failure.code) and "\x1b" not in repr(failure)
    assert failure.code == "ModelError\\x1b]0;pwned\\x07" and len(failure.message) <= MAX_MESSAGE
    assert InvocationError("", "x").code == "Error"


def test_junit_xml_stays_valid_xml_with_control_characters_in_the_text():
    from sm_locust.gates.gates import FAIL, Verdict
    from sm_locust.gates.junit import to_junit_xml

    verdict = Verdict(gate="p95", status=FAIL, observed=f"12 ms{OSC_TITLE}", message=f"ModelError\x00{CSI_CLEAR}")
    text = to_junit_xml([verdict], properties={"endpoint": f"ep{C1_CSI}"})
    root = ET.fromstring(text.split("\n", 1)[1])  # parses: no control character left
    assert "\x1b" not in text and root.find(".//failure").get("message").endswith("ModelError\\x00\\x1b[2J\\x1b[H")
