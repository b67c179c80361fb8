"""Sweep kinds and the one checker: which kind a file is (its section, or `kind:`), one line for a
file that mixes two kinds, and the same wording for the same mistake in any section."""

from __future__ import annotations

import json

import pytest

from sm_locust.cli import main
from sm_locust.errors import UsageError
from sm_locust.sweep.kinds import KINDS, SweepKind, kind_of
from sm_locust.sweep.validate import Checker
from sm_locust.util.registry import Registry
from tests.conftest import SAMPLE_PAYLOAD

REALTIME = f"""\
name: t
grid: {{max_concurrency: [2, 5]}}
load: {{payload: {SAMPLE_PAYLOAD}}}
price_per_hour: 0.2
"""
SERVERLESS = f"""\
name: s
serverless: {{memory_size_mb: 2048, max_concurrency: [2, 4]}}
load: {{payload: {SAMPLE_PAYLOAD}}}
"""


def plan(tmp_path, capsys, text: str) -> tuple[int, str, str]:
    (tmp_path / "sweep.yaml").write_text(text)
    code = main(["sweep", str(tmp_path / "sweep.yaml"), "--plan", "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    return code, out, err.strip()


def error_of(tmp_path, capsys, text: str) -> str:
    code, _, err = plan(tmp_path, capsys, text)
    assert code == 2, err
    assert err.startswith(f"sm-locust: error: {tmp_path / 'sweep.yaml'}: ") and "\n" not in err
    return err[len(f"sm-locust: error: {tmp_path / 'sweep.yaml'}: "):]


# -- which kind a file is ------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_section_decides_the_kind_and_kind_may_say_it_too(tmp_path, capsys):
    code, out, _ = plan(tmp_path, capsys, SERVERLESS)
    assert code == 0 and "tests: stability 1 caller" in out  # the serverless kind's plan
    code, out, _ = plan(tmp_path, capsys, "kind: serverless\n" + SERVERLESS)
    assert code == 0 and "tests: stability 1 caller" in out
    code, out, _ = plan(tmp_path, capsys, "kind: real-time\n" + REALTIME)  # an alias
    assert code == 0 and "2 configurations on local" in out


@pytest.mark.parametrize("text, message", [
    ("kind: serverles\n" + REALTIME,
     f"kind: unknown sweep kind 'serverles'; choose one of: {', '.join(KINDS.names())}"),
    ("kind: realtime\n" + SERVERLESS, "kind: realtime, but the file has a serverless: section (a serverless sweep); "
                                      "leave kind: out or make it serverless"),
    ("kind: serverless\n" + REALTIME, "serverless: missing: a serverless sweep needs a serverless: section "
                                      "(memory_size_mb, max_concurrency)"),
    (SERVERLESS.replace("\nload:", "\ngrid: {serverless.max_concurrency: [8]}\nload:"),
     "grid.serverless.max_concurrency: also set in the serverless: section; set it in one place"),
    (REALTIME + "cold_start: {rounds: 1}\n",
     "cold_start: applies to serverless sweeps only; add a serverless: section"),
])
def test_a_file_is_one_kind(tmp_path, capsys, text, message):
    assert error_of(tmp_path, capsys, text).startswith(message)


@pytest.mark.e2e
def test_a_serverless_sweep_still_varies_other_settings_with_grid(tmp_path, capsys):
    code, out, err = plan(tmp_path, capsys, SERVERLESS.replace("\nload:", "\ngrid: {service_time_ms: [20, 40]}\nload:"))
    assert code == 0, err
    assert "4 configurations on local" in out
    assert "[4] memory_size_mb 2048, max_concurrency 4, service_time_ms 40:" not in out  # the memory size does not vary
    assert "[4] max_concurrency 4, service_time_ms 40: " in out


def fake_kinds() -> Registry[SweepKind]:
    kinds: Registry[SweepKind] = Registry("sweep kind")
    for name in KINDS:
        kinds.add(name, KINDS.get(name))
    kinds.add("scaling", SweepKind("scaling", section="scaling", keys=("ramp",),
                                   hint="policy, target_value"))
    return kinds


def test_two_kinds_sections_in_one_file_are_one_line():
    data = {"name": "x", "serverless": {}, "scaling": {}}
    with pytest.raises(UsageError) as caught:
        kind_of(data, Checker("s.yaml"), fake_kinds())
    assert caught.value.message == ("s.yaml: serverless, scaling: a sweep file is one kind; these are the sections "
                                    "of serverless and scaling sweeps: split it into one file per kind")


def test_a_registered_kind_is_found_by_its_section_and_its_keys_need_it():
    kinds = fake_kinds()
    assert kind_of({"scaling": {}, "ramp": []}, Checker(), kinds).name == "scaling"
    assert kind_of({"grid": {}}, Checker(), kinds).name == "realtime"
    with pytest.raises(UsageError, match="ramp: applies to scaling sweeps only; add a scaling: section"):
        kind_of({"serverless": {}, "ramp": []}, Checker(), kinds)


# -- one checker, one message ------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value", [
    ("objective.slo_ms", ".nan"), ("objective.target_rps", ".inf"), ("max_cost_usd", "-.inf"),
    ("load.step_seconds", ".inf"),
])
def test_numbers_must_be_finite_wherever_they_are(tmp_path, capsys, key, value):
    section, _, name = key.rpartition(".")
    text = REALTIME.replace("load: {", f"load: {{{name}: {value}, ") if section == "load" else (
        REALTIME + (f"{section}: {{{name}: {value}}}\n" if section else f"{name}: {value}\n"))
    got = float(value.replace(".", "", 1))  # .nan -> nan, -.inf -> -inf
    assert error_of(tmp_path, capsys, text) == f"{key}: must be a finite number, got {got!r}"


def test_a_kinds_section_and_the_shared_keys_word_the_same_mistake_the_same_way(tmp_path, capsys):
    shared = error_of(tmp_path, capsys, REALTIME + "objective: {slo_ms: fast}\n")
    own = error_of(tmp_path, capsys, SERVERLESS.replace("[2, 4]", "[2, 4], idle_timeout_s: fast"))
    assert shared == "objective.slo_ms: must be a number, got 'fast'"
    assert own == "serverless.idle_timeout_s: must be a number, got 'fast'"
    nan = error_of(tmp_path, capsys, SERVERLESS.replace("[2, 4]", "[2, 4], idle_timeout_s: .nan"))
    assert nan == "serverless.idle_timeout_s: must be a finite number, got nan"


def test_an_empty_serverless_section_names_what_it_needs(tmp_path, capsys):
    text = SERVERLESS.replace("serverless: {memory_size_mb: 2048, max_concurrency: [2, 4]}", "serverless:")
    assert error_of(tmp_path, capsys, text).startswith("serverless.memory_size_mb: missing: give one value or a list")


def test_the_checker_rules():
    check = Checker("f.yaml")
    assert check.integer("k", 3.0, minimum=1) == 3 and isinstance(check.integer("k", 3.0), int)
    assert check.number("k", 2, above=0) == 2.0
    for value, rule, message in [
        (True, {}, "must be a number, got True"),
        (0, {"above": 0}, "must be more than 0, got 0"),
        (-1, {"minimum": 0}, "must be at least 0, got -1"),
        (2, {"maximum": 1}, "must be at most 1, got 2"),
        (float("inf"), {}, "must be a finite number, got inf"),
    ]:
        with pytest.raises(UsageError) as caught:
            check.number("a.b", value, **rule)
        assert caught.value.message == f"f.yaml: a.b: {message}"
    with pytest.raises(UsageError, match=r"^f.yaml: a.b: must be a whole number, got 2.5$"):
        check.integer("a.b", 2.5)
    with pytest.raises(UsageError, match=r"^f.yaml: a: unknown key; valid keys: b, c$"):
        check.unknown("", {"b": 1, "a": 2}, ("b", "c"))
    assert check.values("a", 3) == [3] and check.mapping("a", None) == {}


# -- a kind's own cleanup ------------------------------------------------------------------------------------

def fake_cleanup(sweep_id, *, deploy, region, profile, client, out_dir, progress):
    """A kind's cleanup (loaded by name, so it reports through the sweep folder it is given)."""
    progress(f"restored the scaling policy of {sweep_id}")
    (out_dir / "cleaned.json").write_text(json.dumps({"sweep_id": sweep_id, "deploy": deploy, "region": region}))
    return ["policy of endpoint e"], []


def test_cleanup_runs_the_kinds_own_cleanup_when_it_has_one(monkeypatch, tmp_path):
    from sm_locust.sweep import api

    kinds = fake_kinds()
    kinds.add("restoring", SweepKind("restoring", section="restoring"))
    monkeypatch.setattr(api, "KINDS", kinds)
    monkeypatch.setitem(api.CLEANUPS, "restoring", "tests.sweep.test_sweep_kinds:fake_cleanup")
    lines: list[str] = []
    deleted, left = api.cleanup("sid", kind="restoring", deploy="sagemaker", region="eu-west-1", out=tmp_path,
                                printer=lines.append)
    assert (deleted, left) == (["policy of endpoint e"], [])
    assert json.loads((tmp_path / "cleaned.json").read_text()) == {"sweep_id": "sid", "deploy": "sagemaker",
                                                                    "region": "eu-west-1"}
    assert lines == ["sm-locust sweep: restored the scaling policy of sid"]
    assert api.cleanup("sid", kind="serverless", deploy="local") == ([], [])  # the deployer's (local: nothing tagged)


def test_the_registry_names_none_of_the_kinds_code_and_each_kind_has_its_own():
    """The kinds build on the registry: it neither imports nor names (by string) any of their modules.
    schema.py holds each section's parser, api.py (above the kinds) each kind's loader and cleanup."""
    import ast
    from pathlib import Path

    from sm_locust.sweep import api, schema
    from sm_locust.sweep import kinds as registry

    tree = ast.parse(Path(registry.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    kinds = [f"sm_locust.sweep.{name}" for name in KINDS]
    assert not [m for m in imported | named if m and any(m == k or m.startswith(k + ".") for k in kinds)]
    assert "importlib" not in imported
    assert set(api.LOADERS) == set(KINDS) and set(api.CLEANUPS) <= set(KINDS)
    for name in KINDS:
        kind = KINDS.get(name)
        assert callable(api.code_of(api.LOADERS[name]))
        if kind.section is None:
            assert name not in schema.SECTION_PARSERS
            continue
        spec = schema.SECTION_PARSERS[name]
        assert callable(spec.parse_section) and isinstance(spec.REFUSED, dict)
        assert (spec.SECTION, spec.KEYS) == (kind.section, kind.keys)
