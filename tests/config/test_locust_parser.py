"""What the locustfile adds to Locust's own parser (sm_locust/config/locust_parser.py): config files read as
UTF-8 text (a byte-order mark dropped, binary refused in one line) and Locust's --processes / --users within
this machine's bounds, whichever way they came (command line, LOCUST_* variables, locust.conf)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sm_locust.config.locust_parser import check_config_files, check_locust_load, guard_parser, open_config_file
from sm_locust.errors import UsageError
from sm_locust.util.numbers import MAX_USERS, max_processes


def test_locusts_load_is_bounded_on_one_machine():
    check_locust_load(SimpleNamespace(processes=max_processes(), num_users=MAX_USERS, master=False))
    check_locust_load(SimpleNamespace(processes=-1, num_users=None))  # -1: one per core
    with pytest.raises(UsageError, match=f"--processes must be at most {max_processes()} .*got 64"):
        check_locust_load(SimpleNamespace(processes=max(64, max_processes() + 1), num_users=1))
    with pytest.raises(UsageError, match="--users must be at most 100,000 on one machine, got 1,000,000,000"):
        check_locust_load(SimpleNamespace(processes=None, num_users=1_000_000_000, master=False))
    check_locust_load(SimpleNamespace(processes=None, num_users=1_000_000, master=True))  # spread over workers


def test_config_files_are_read_as_utf8_text(tmp_path, capsys):
    bom = tmp_path / "locust.conf"
    bom.write_text("think-time = 0\n", encoding="utf-8-sig")  # Notepad: the first key was "\ufeffthink-time"
    stream = open_config_file(str(bom))
    assert stream.read() == "think-time = 0\n" and stream.name == str(bom)
    (tmp_path / "binary.conf").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SystemExit) as info:
        open_config_file(str(tmp_path / "binary.conf"))
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == (f"sm-locust: error: Locust config file {tmp_path / 'binary.conf'}: "
                                               "not UTF-8 text (byte 0 is 0xff); give a text file")


def test_sm_locust_run_checks_the_config_files_locust_will_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    check_config_files({})  # none there
    (tmp_path / "locust.conf").write_bytes(b"users = \xd3\n")
    with pytest.raises(UsageError, match="Locust config file locust.conf: not UTF-8 text"):
        check_config_files({})
    (tmp_path / "locust.conf").write_text("users = 2\n")
    (tmp_path / "other.conf").write_bytes(b"\x00\xff")
    with pytest.raises(UsageError, match="other.conf: not UTF-8"):
        check_config_files({"LOCUST_CONFIG": "other.conf"})


def test_the_guard_wraps_a_parsers_parse_args(capsys):
    class Parser:
        _config_file_open_func = open

        def parse_args(self, *args, **kwargs):
            return SimpleNamespace(processes=None, num_users=10 ** 9, master=False)

    parser = Parser()
    guard_parser(parser)
    assert parser._config_file_open_func is open_config_file
    with pytest.raises(SystemExit) as info:
        parser.parse_args()
    assert info.value.code == 2 and "--users must be at most 100,000" in capsys.readouterr().err
