"""tests/run.py, the suite's parallel runner: how it deals files, reads pytest's output and decides
its exit code (the processes themselves run in CI's `.ci/run`)."""

from __future__ import annotations

from pathlib import Path

from tests.run import NO_TESTS, collected_files, counts, deal, file_seconds, overall_code


def test_files_are_dealt_longest_first_onto_the_least_loaded_and_unknown_ones_weigh_the_median():
    known = {"a.py": 10.0, "b.py": 9.0, "c.py": 5.0, "d.py": 1.0}
    groups = deal(["a.py", "b.py", "c.py", "d.py", "new.py"], known, 2)
    assert groups == [["a.py", "c.py", "d.py"], ["b.py", "new.py"]]  # 16 s and 18 s (new.py: the median, 9 s)
    assert sorted(f for g in groups for f in g) == ["a.py", "b.py", "c.py", "d.py", "new.py"]  # each once
    assert deal(["a.py"], known, 4) == [["a.py"]]  # no empty processes
    assert deal([], known, 4) == []
    assert deal(["x.py", "y.py"], {}, 2) == [["x.py"], ["y.py"]]


def test_the_collected_files_are_read_from_the_node_ids_in_order():
    output = ("tests/b/test_x.py::test_one\ntests/b/test_x.py::test_two[p-1]\ntests/a/test_y.py::TestC::test_z\n"
              "\n3/9 tests collected (6 deselected) in 1.20s\n")
    assert collected_files(output) == ["tests/b/test_x.py", "tests/a/test_y.py"]
    assert collected_files("no tests collected (5 deselected) in 0.5s\n") == []


def test_any_failing_process_fails_the_run_and_none_running_a_test_is_no_tests():
    assert overall_code([0, 0, 0]) == 0
    assert overall_code([0, NO_TESTS]) == 0  # a tier with nothing selected, beside one that ran
    assert overall_code([NO_TESTS, NO_TESTS]) == NO_TESTS
    assert overall_code([0, 1, 0]) == 1
    assert overall_code([NO_TESTS, 2, 1]) == 2  # the first failing process's code
    assert overall_code([0, -9]) == -9  # killed by a signal


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="2"
skipped="3" tests="20" time="9.0"><testcase classname="tests.package.test_test_runner" name="t1" time="1.5" />
<testcase classname="tests.package.test_test_runner" name="t2" time="2.0" />
<testcase classname="tests.package.test_import_layers.TestX" name="t3" time="0.5" />
<testcase classname="tests.gone.test_nothing" name="t4" time="7" /></testsuite></testsuites>"""


def test_counts_and_seconds_per_file_come_from_the_junit_xml(tmp_path):
    xml = tmp_path / "shard.xml"
    xml.write_text(JUNIT)
    assert counts(xml) == {"passed": 14, "failed": 3, "skipped": 3}  # errors count as failed
    assert counts(tmp_path / "missing.xml") == {"passed": 0, "failed": 0, "skipped": 0}
    seconds = file_seconds(xml)
    assert seconds == {"tests/package/test_test_runner.py": 3.5, "tests/package/test_import_layers.py": 0.5}
    assert Path(__file__).name == "test_test_runner.py"  # the classname -> file mapping found this very file
