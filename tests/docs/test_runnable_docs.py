"""The pure parts of the docs test's machinery (tests/docs/runnable.py): which blocks are marked, in
which order they run, how they are shortened and checked, how a screenshot is read; and the
process-tree check. The blocks themselves run, all in one clone, in test_runnable_all.py."""

from __future__ import annotations

import os
import re
import struct
import zlib

import pytest

from tests.conftest import ROOT
from tests.docs.runnable import (
    DOCUMENTS,
    MARK,
    ORDER,
    STARVED,
    checked_script,
    commands,
    documents_in_order,
    drawn_share,
    exit_codes,
    linked_order,
    png_pixels,
    runnable_blocks,
    shortened,
    written_folders,
)


def test_marked_blocks_are_shell_and_name_files_that_exist():
    found = 0
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for match in MARK.finditer(text):
            found += 1
            assert match["lang"] in ("bash", "sh"), f"{document}: a runnable block must be a shell block"
            for path in re.findall(r"(?:examples|sm_locust)/[\w./-]+\.\w+", match["body"]):
                assert (ROOT / path).is_file(), f"{document}: {path} does not exist"
    assert found >= 8  # README's examples at least


def test_shortening_keeps_the_commands():
    block = "sm-locust run -u 8 -t 1m --payload examples/body.json --endpoint-url http://127.0.0.1:8080\n"
    assert shortened(block, {"8080": 1234}) == ("sm-locust run -u 8 -t 3s --payload examples/body.json "
                                                "--endpoint-url http://127.0.0.1:1234\n")
    assert "--set" not in shortened("sm-locust sweep examples/sweeps/batching.yaml --plan", {})
    setup = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[demo]' && sm-locust demo\n"
    assert shortened(setup, {}) == "sm-locust demo --step-seconds 1\n"


def test_each_foreground_command_is_checked():
    block = "sm-locust serve --port 8080 &   # a comment\n# a note\nsm-locust run \\\n    -u 2\nkill %1\n"
    assert commands(block) == ["sm-locust serve --port 8080 &   # a comment", "sm-locust run      -u 2", "kill %1"]
    script = checked_script(block, 1).splitlines()
    assert script[1] == "sm-locust run      -u 2" and script[2].endswith('{ [ "$__rc" -le 1 ]; } || exit "$__rc"')
    assert len(script) == 5  # the background command has no check
    assert exit_codes('::rc 0\n{"rows": 4}::rc 0\n::rc 1\n') == [0, 0, 1]  # curl -s ends with no newline
    # a sweep's exit 1 passes only when the block's log ends saying the load generator was starved twice
    sweep = checked_script("sm-locust sweep a.yaml --plan\nsm-locust sweep a.yaml --set x=1\n", 0).splitlines()
    assert STARVED not in sweep[1] and sweep[1].endswith('{ [ "$__rc" -le 0 ]; } || exit "$__rc"')
    assert sweep[3] == ('__rc=$?; echo "::rc $__rc"; { [ "$__rc" -le 0 ] || { [ "$__rc" -eq 1 ] && tail -n 3 '
                        f'"$BLOCK_LOG" | grep -qF "{STARVED}"; }}; }} || exit "$__rc"')


@pytest.mark.e2e
def test_a_block_that_leaves_a_process_running_is_named(tmp_path):
    """The process-tree check after each block: a background job not stopped is named, also one that
    left the block's process group and session (setsid); one stopped is not; the named are ended."""
    import psutil

    from tests.docs.runnable import run_block

    result, left = run_block(tmp_path, "sleep 61 &\nsetsid sleep 62 &\necho started\n", dict(os.environ),
                             tmp_path / "a.log", grace_s=1.0)
    assert result.returncode == 0 and "started" in result.stdout
    assert sorted(left) == ["sleep 61", "sleep 62"], left
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] in (["sleep", "61"], ["sleep", "62"])]
    result, left = run_block(tmp_path, "sleep 60 &\nkill %1\nexit 3\n", dict(os.environ), tmp_path / "b.log")
    assert left == [] and result.returncode == 3  # the block's own exit code


def test_the_order_is_readmes_then_the_docs_as_readme_links_them_then_the_rest():
    readme = "see [docs/gates.md](docs/gates.md), then docs/plateau.md and again docs/gates.md"
    order = linked_order(readme)
    assert order[:3] == ["README.md", "docs/gates.md", "docs/plateau.md"]
    rest = order[3:]
    assert rest == sorted(rest) and len(order) == len(DOCUMENTS)  # every document once
    assert sorted(ORDER) == sorted(DOCUMENTS) and ORDER[0] == "README.md"


def test_a_heredoc_is_one_command_checked_after_its_delimiter():
    block = ("mkdir -p reports\npython - <<'PY'   # the data\nimport numpy  # x\nprint(1) \\\nPY\n"
             "cat <<-END > reports/x\n\thello\n\tEND\nsm-locust serve \\\n  --port 8080 &\nkill %1; wait\n")
    assert commands(block) == ["mkdir -p reports", "python - <<'PY'   # the data\nimport numpy  # x\nprint(1) \\\nPY",
                               "cat <<-END > reports/x\n\thello\n\tEND", "sm-locust serve    --port 8080 &",
                               "kill %1; wait"]
    script = checked_script(block, 0)
    assert script.count("::rc") == 4  # not inside a heredoc, none for the background job
    assert "PY\n__rc=$?" in script and "\tEND\n__rc=$?" in script and "(1) \\\nPY" in script


def test_the_triton_example_is_runnable_and_its_heredoc_survives():
    text = (ROOT / "docs" / "payloads.md").read_text()
    [triton] = [body for tag, body in runnable_blocks(text) if "--protocol triton" in body]
    heredoc = [c for c in commands(triton) if "<<'PY'" in c]
    assert len(heredoc) == 1 and heredoc[0].endswith("\nPY") and "np.savez(" in heredoc[0]


def png(width: int, height: int, rows: list[bytes], filters: list[int], channels: int = 3) -> bytes:
    """A PNG of already-filtered rows (each filter byte given), as an encoder writes one."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    colour = {1: 0, 3: 2, 4: 6}[channels]
    raw = b"".join(bytes([f]) + row for f, row in zip(filters, rows, strict=True))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def filtered(image: list[bytes], kind: int, y: int, channels: int) -> bytes:
    """Row y of `image` written with PNG filter `kind` (the encoder's side: the byte minus its predictor)."""
    row, up = image[y], image[y - 1] if y else bytes(len(image[y]))
    out = []
    for x, value in enumerate(row):
        a = row[x - channels] if x >= channels else 0
        b = up[x]
        c = up[x - channels] if x >= channels else 0
        p = a + b - c
        paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        out.append((value - [0, a, b, (a + b) // 2, paeth][kind]) % 256)
    return bytes(out)


def test_a_screenshot_is_read_through_every_png_filter():
    import numpy as np

    rng = np.random.default_rng(1)
    image = [bytes(rng.integers(0, 256, 5 * 3, dtype=np.uint8)) for _ in range(10)]
    image[0] = b"\xff" * 15  # white: the most common colour, 5 of the 50 pixels
    kinds = [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]
    width, height, pixels = png_pixels(png(5, 10, [filtered(image, k, y, 3) for y, k in enumerate(kinds)], kinds))
    assert (width, height) == (5, 10) and pixels.tobytes() == b"".join(image)
    assert drawn_share(png(5, 10, [filtered(image, k, y, 3) for y, k in enumerate(kinds)], kinds))[2] == 1 - 5 / 50
    white = b"\xff" * 15
    assert drawn_share(png(5, 2, [white, bytes(15)], [0, 2])) == (5, 2, 0.0)  # blank: one colour


def test_every_document_with_runnable_blocks_runs_once_in_the_newcomers_order():
    runs = documents_in_order()
    assert runs[0] == "README.md" and len(set(runs)) == len(runs)
    assert runs == [d for d in ORDER if runnable_blocks((ROOT / d).read_text())]
    assert "docs/payloads.md" in runs and "docs/gates.md" in runs  # the Triton heredoc; README's gates again
    assert documents_in_order(["docs/gates.md", "README.md"]) == ["docs/gates.md", "README.md"]  # order as given


def test_no_two_documents_write_one_folder():
    """Each document writes folders of its own: a later document's `--out` never meets an earlier
    one's run in the shared clone (sm-locust refuses a folder that holds a run)."""
    assert written_folders("sm-locust run --out reports/a -u 1\nx --sm-out=reports/b/c\n") == ["reports/a",
                                                                                              "reports/b/c"]
    writers: dict[str, set[str]] = {}
    for document in DOCUMENTS:
        for _, block in runnable_blocks((ROOT / document).read_text()):
            for folder in written_folders(block):
                writers.setdefault(folder.rstrip("/"), set()).add(document)
    assert len(writers) >= 10
    shared = {folder: sorted(by) for folder, by in writers.items() if len(by) > 1}
    assert not shared, f"folders written by the blocks of more than one document: {shared}"
