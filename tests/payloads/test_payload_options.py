"""The payload options: declared once, shown in Locust's web UI, forwarded by `sm-locust run`, and
checked before anything starts (one line, exit 2, no run folder) when the input is bad."""

from __future__ import annotations

import argparse
import json
import pickle
import re
from types import SimpleNamespace

import numpy as np
import pytest

from sm_locust.cli import main
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import all_option_specs, forwarded_arguments, parse_options, register_options
from sm_locust.endpoint.model import sample_rows
from sm_locust.errors import UsageError
from sm_locust.payloads.options import OPTIONS, PayloadSettings, parse_expected_shape, prepare_payloads
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli

FLAGS = [spec.flag for spec in OPTIONS]


def locust_parser():
    from locust import argument_parser

    parser = argument_parser.get_parser()
    if "--split" not in parser._option_string_actions:  # not yet registered by an imported locustfile
        register_options(parser)
    return parser


def test_every_payload_option_is_registered_once_and_shows_in_the_web_ui():
    flags = [spec.flag for spec in all_option_specs()]
    assert set(FLAGS) <= set(flags) and len(flags) == len(set(flags))
    parser = locust_parser()
    assert {spec.dest for spec in OPTIONS} <= set(parser.args_included_in_web_ui)


def test_sm_locust_run_forwards_what_locust_parses_back():
    given = SimpleNamespace(serializer="protobuf", model_name="ranker", selection="random", payload_seed=7,
                            batch_size=50, payload_base64=True, split=4, validate_response=True, expect_shape="N",
                            array_dtype="")
    args = forwarded_arguments(parse_options(vars(given)))
    assert args == ["--serializer", "protobuf", "--model-name", "ranker", "--selection", "random", "--payload-seed",
                    "7", "--batch-size", "50", "--payload-base64", "true", "--split", "4", "--validate-response",
                    "true", "--expect-shape", "N"]
    parsed = locust_parser().parse_args(["-f", "x.py", *args])
    for key, value in vars(given).items():
        assert getattr(parsed, key) == value, key


def test_the_run_command_declares_the_payload_options():
    from sm_locust.cli import build_parser

    args, extra = build_parser("run").parse_known_args(["run", "--split", "3", "--payload-base64", "on", "--shape",
                                                        "step"])
    assert not extra and args.split == 3 and args.payload_base64 is True and args.shape == "step"


def test_env_vars_set_payload_options(monkeypatch):
    from sm_locust.config.options import add_cli_options

    monkeypatch.setenv("SM_LOCUST_SPLIT", "5")
    monkeypatch.setenv("SM_LOCUST_VALIDATE_RESPONSE", "yes")
    parser = argparse.ArgumentParser()
    add_cli_options(parser)
    args = parser.parse_args([])
    assert args.split == 5 and args.validate_response is True


def test_serializer_flags_belong_to_their_serializers():
    assert PayloadSettings(serializer="numpy-string", array_dtype="float64",
                           array_shape="N,78").serializer_options() == {
        "dtype": "float64", "shape": "N,78"}
    with pytest.raises(UsageError, match="--model-name applies to the protobuf serializer, not 'npy'"):
        PayloadSettings(serializer="npy", model_name="m").serializer_options()
    with pytest.raises(UsageError, match="--array-shape applies to the numpy-raw serializer, not 'json'"):
        PayloadSettings(array_shape="N,78").serializer_options()


def test_expected_shape_and_validator():
    assert parse_expected_shape("N,1") == (None, 1) and parse_expected_shape("") is None
    with pytest.raises(UsageError, match="--expect-shape 'N,x'"):
        parse_expected_shape("N,x")
    with pytest.raises(UsageError, match="only apply with --validate-response"):
        PayloadSettings(expect_outputs="prob").build_validator(None)
    assert PayloadSettings().build_validator(None) is None


def test_prepare_builds_the_pool_validator_and_split():
    settings = SageMakerSettings(payload=str(SAMPLE_PAYLOAD))
    prepared = prepare_payloads(settings, parse_options({"split": 2, "validate_response": True, "expect_shape": "N"}))
    assert prepared.split == 2 and prepared.validator.expected_shape == (None,)
    assert prepared.describe()["split"] == 2 and prepared.describe()["count"] == 1


# -- bad input on the command line: one line, exit 2, nothing started --------------------------


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "args.jsonl").write_text('{"Body": "1,2", "ContentType": "text/csv"}\n{"Body": "3,4",\n')
    (d / "b64.jsonl").write_text('{"Body": "not base64!!"}\n')
    np.save(d / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (d / "pickled.npy").write_bytes(pickle.dumps([1, 2, 3]))
    (d / "empty").mkdir()
    (d / "empty.json").write_bytes(b"")
    ids, vals = sample_rows(4)
    np.savez(d / "rows.npz", feat_ids=ids, feat_vals=vals)
    (d / "img.png").write_bytes(b"\x89PNG....")
    return d


BAD = {
    "unknown serializer": (["--payload", "{d}/rows.npz", "--serializer", "protobuff"],
                           ["unknown serializer 'protobuff'", "json", "numpy-raw", "protobuf"]),
    "malformed JSONL": (["--payload", "{d}/args.jsonl"], ["args.jsonl:2: not valid JSON"]),
    "pickled .npy": (["--payload", "{d}/objects.npy"], ["objects.npy", "refused", "never"]),
    "pickle bytes as .npy": (["--payload", "{d}/pickled.npy"], ["pickled.npy", "refused"]),
    "empty folder": (["--payload", "{d}/empty"], ["holds no files"]),
    "empty file": (["--payload", "{d}/empty.json"], ["empty.json", "is empty"]),
    "dtype misfit": (["--payload", "{d}/rows.npz", "--serializer", "npy", "--array-dtype", "int64"],
                     ["rows.npz", "needs a float dtype"]),
    "unknown dtype": (["--payload", "{d}/rows.npz", "--serializer", "numpy-raw", "--array-dtype", "float33"],
                      ["unknown dtype 'float33'"]),
    "shape misfit": (["--payload", "{d}/rows.npz", "--serializer", "numpy-raw", "--array-shape", "N,77"],
                     ["rows.npz", "do not fit shape [N,77]"]),
    "bad base64": (["--payload", "{d}/b64.jsonl", "--payload-base64", "on"],
                   ["b64.jsonl:1: Body is marked base64 but does not decode"]),
    "flag for another serializer": (["--payload", "{d}/rows.npz", "--model-name", "m"],
                                    ["--model-name applies to the protobuf serializer"]),
    "unknown selection": (["--payload", "{d}/rows.npz", "--selection", "shuffle"],
                          ["unknown payload selection 'shuffle'"]),
    "weighted without weights": (["--payload", "{d}/rows.npz", "--selection", "weighted"], ["needs weights"]),
    "bad batch size": (["--payload", "{d}/rows.npz", "--batch-size", "0"], ["--batch-size: must be at least 1"]),
    "split too far": (["--payload", "{d}/rows.npz", "--batch-size", "2", "--split", "3"],
                      ["2 rows cannot be split into 3 parts"]),
    "split unsplittable": (["--payload", "{d}/img.png", "--split", "2"], ["cannot split a image/png body"]),
    "bad split": (["--payload", "{d}/rows.npz", "--split", "0"], ["--split: must be at least 1"]),
    "expect without validate": (["--payload", "{d}/rows.npz", "--expect-outputs", "prob"], ["--validate-response"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_payload_input_is_one_line_exit_2_and_no_run_folder(case, bad_inputs, tmp_path, capsys):
    argv, needles = BAD[case]
    out = tmp_path / "run"
    try:  # a bad number is refused by the parser (SystemExit), a bad file by the command (return code)
        code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                     *[a.format(d=bad_inputs) for a in argv]])
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(r"sm-locust( run)?: error: ", lines[0]), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.e2e
def test_bad_serializer_through_the_real_command(bad_inputs, tmp_path):
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out",
                     str(tmp_path / "r"), "--payload", str(bad_inputs / "rows.npz"), "--serializer", "pb")
    assert_one_line_error(result, 2, "unknown serializer 'pb'", "protobuf")
    assert not (tmp_path / "r").exists()


@pytest.mark.e2e
def test_sm_locust_run_with_payload_options_end_to_end(endpoint, bad_inputs, tmp_path):
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                     str(bad_inputs / "rows.npz"),
                     "--serializer", "protobuf", "--content-type", "X-protobuf", "--batch-size", "4", "--split", "2",
                     "--validate-response", "on", "--accept", "application/x-npy", "-u", "2", "-r", "10", "-t", "4s",
                     "--out", str(out), "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["failures"] == 0, summary["totals"]
    assert summary["totals"]["requests"] > 0
    assert summary["payload"]["split"] == 2 and summary["payload"]["validate_response"] is True
    stats = (out / "locust_stats.csv").read_text()
    assert "InvokeEndpointSplit,ep," in stats and "InvokeEndpoint,ep/part," in stats


def test_every_flag_documented_in_payloads_md_exists():
    import re

    from sm_locust.cli import build_parser
    from tests.conftest import ROOT

    known = set()
    for command in ("run", "serve"):  # the Triton example starts the local endpoint too
        parser = build_parser(command)._subparsers._group_actions[0].choices[command]
        known |= {flag for action in parser._actions for flag in action.option_strings}
    text = (ROOT / "docs" / "payloads.md").read_text()
    documented = set(re.findall(r"(?<![\w#-])--[a-z][a-z0-9-]*", text)) - {"--quick"}  # --quick: bench/serializers.py
    assert documented and documented <= known, sorted(documented - known)
