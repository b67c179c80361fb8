"""Traffic mixes, the pure parts (sm_locust.mix): how a mix is written, how it is drawn, what it sends.

Parsing every form a user can give (generated, inline, CSV, JSONL) and every mistake as one line
naming the flag; the alias table's probabilities equal the weights; the seeded stream: the same seed
and process give the same sequence, other processes other sequences; a 0.7/0.3 mix over 2,000 picks
lands within 3 points; and `MixedPool` puts the picked name in the request header field while the
Locust entry stays the endpoint's.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from sm_locust.config.options import parse_options
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.mix import AliasTable, Picker, model_names, parse_mix, zipf_weights
from sm_locust.mix.options import mix_settings
from sm_locust.mix.pool import MixedPool
from sm_locust.mix.sampler import stream_seed
from sm_locust.payloads import PayloadPool


def Options(**values):  # noqa: N802  (reads like the options it parses)
    return parse_options(values)


# -- parsing -------------------------------------------------------------------------------------


def test_generated_names_and_weights():
    assert model_names(3) == ["model-0001.tar.gz", "model-0002.tar.gz", "model-0003.tar.gz"]
    assert model_names(12345)[-1] == "model-12345.tar.gz"
    mix = parse_mix("zipf:1.2:50")
    assert mix.names == tuple(model_names(50)) and mix.kind == "zipf" and mix.zipf_s == 1.2
    assert math.isclose(sum(mix.weights), 1.0)
    assert math.isclose(mix.weights[0] / mix.weights[1], 2 ** 1.2)  # rank k weighs 1 / k^S
    assert mix.weights == tuple(zipf_weights(1.2, 50))
    uniform = parse_mix("uniform:4")
    assert uniform.weights == (0.25,) * 4 and uniform.kind == "uniform"
    assert parse_mix("zipf:0:4").weights == uniform.weights  # S = 0 is uniform


def test_generated_component_names_are_the_lora_adapters_the_emulation_hosts():
    from sm_locust.endpoint.adapters import parse_adapters

    mix = parse_mix("zipf:1.1:12", "inference_component")
    assert mix.names == parse_adapters("12") and mix.names[0] == "adapter-1" and mix.names[-1] == "adapter-12"
    assert mix.field == mix.describe()["field"] == "inference_component" and mix.kind == "zipf"
    assert math.isclose(mix.weights[0] / mix.weights[1], 2 ** 1.1)
    uniform = parse_mix("uniform:3", "inference_component")
    assert uniform.names == ("adapter-1", "adapter-2", "adapter-3") and uniform.weights == (1 / 3,) * 3
    assert parse_mix("uniform:3").names[0] == "model-0001.tar.gz"  # --target-models: model files


def test_inline_lists_and_files(tmp_path):
    mix = parse_mix("a=0.7, b=0.3", "inference_component")
    assert mix.names == ("a", "b") and mix.weights == (0.7, 0.3) and mix.field == "inference_component"
    assert parse_mix("x.tar.gz,y.tar.gz").weights == (0.5, 0.5)  # bare names weigh 1 each
    assert parse_mix("a=3,b=1").weights == (0.75, 0.25)  # normalised
    csv = tmp_path / "models.csv"
    csv.write_text("name,weight\nm1.tar.gz,2\nm2.tar.gz,1\n\nm3.tar.gz\n")
    mix = parse_mix(str(csv))
    assert mix.names == ("m1.tar.gz", "m2.tar.gz", "m3.tar.gz") and mix.weights == (0.5, 0.25, 0.25)
    assert mix.kind == "file"
    jsonl = tmp_path / "components.jsonl"
    jsonl.write_text('{"name": "ic-a", "weight": 0.7}\n\n{"name": "ic-b", "weight": 0.3}\n')
    assert parse_mix(str(jsonl), "inference_component").names == ("ic-a", "ic-b")


@pytest.mark.parametrize(("text", "field", "needle"), [
    ("zipf:1.1", "target_model", "is not zipf:S:N"),
    ("zipf:x:10", "target_model", "S must be a number"),
    ("zipf:-1:10", "target_model", "S must be a finite number >= 0"),
    ("uniform:0", "target_model", "N must be between 1 and"),
    ("uniform:ten", "target_model", "N must be a whole number"),
    ("zipf:1", "inference_component", "is not zipf:S:N"),
    ("a=0.7,a=0.3", "target_model", "names 'a' twice"),
    ("a=-1,b=2", "target_model", "must be a finite number >= 0"),
    ("a=0,b=0", "target_model", "the weights sum to 0"),
    ("a=x", "target_model", "is 'x', not a number"),
    (" a=1,b\tc=1", "target_model", "does not match TargetModel's pattern"),
    ("modèle=1", "target_model", "holds 'è': TargetModel"),  # --target-model's rule: was 9,600 failures a second
    ("a.b=1", "inference_component", "'a.b' does not match InferenceComponentName's pattern"),
    ("ic-=1", "inference_component", "InferenceComponentName"),
    ("x" * 2000, "target_model", "is 2000 characters; TargetModel takes at most 1024"),  # not "File name too long"
    ("a=1e308,b=1e308", "target_model", "the weights sum past the largest number"),
    ("missing.csv", "target_model", "no such file"),
    ("  ", "inference_component", "--inference-components is empty"),
])
def test_bad_mixes_are_one_line_errors(text, field, needle):
    with pytest.raises(UsageError, match=needle) as info:
        parse_mix(text, field)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("--target-models" if field == "target_model" else "--inference-components")


def test_bad_files_name_the_line(tmp_path):
    bad = tmp_path / "m.jsonl"
    bad.write_text('{"name": "a"}\nnot json\n')
    with pytest.raises(UsageError, match="line 2 is not JSON"):
        parse_mix(str(bad))
    wide = tmp_path / "m.csv"
    wide.write_text("a,1,extra\n")
    with pytest.raises(UsageError, match="has 3 columns; write name,weight"):
        parse_mix(str(wide))


def test_an_excel_csv_with_a_byte_order_mark_is_read_and_a_file_must_be_regular(tmp_path):
    import os

    excel = tmp_path / "excel.csv"
    excel.write_text("name,weight\r\nm1.tar.gz,3\r\nm2.tar.gz,1\r\n", encoding="utf-8-sig")  # "CSV UTF-8"
    assert parse_mix(str(excel)).names == ("m1.tar.gz", "m2.tar.gz")
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_text('{"name": "a"}\n', encoding="utf-8-sig")
    assert parse_mix(str(jsonl)).names == ("a",)
    os.mkfifo(tmp_path / "fifo.csv")  # was: the read blocked forever
    with pytest.raises(UsageError, match="'.*fifo.csv' is not a regular file"):
        parse_mix(str(tmp_path / "fifo.csv"))
    (tmp_path / "latin1.csv").write_bytes(b"mod\xe8le,1\n")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        parse_mix(str(tmp_path / "latin1.csv"))
    (tmp_path / "huge.csv").write_text("a,1e308\nb,1e308\n")
    with pytest.raises(UsageError, match="sum past the largest number"):
        parse_mix(str(tmp_path / "huge.csv"))


def test_the_web_ui_may_not_name_a_file(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("a,1\n")
    with pytest.raises(UsageError, match="only be given on the command line"):
        parse_mix(str(path), allow_files=False)
    assert parse_mix("zipf:1:3", allow_files=False).names == tuple(model_names(3))


def test_options_refuse_two_mixes_or_a_mix_beside_its_single_target():
    assert mix_settings(Options()).mix is None
    assert mix_settings(Options(target_models="uniform:2", seed="7")).seed == 7
    with pytest.raises(UsageError, match="--target-models and --inference-components both given"):
        mix_settings(Options(target_models="uniform:2", inference_components="a,b"))
    with pytest.raises(UsageError, match="--target-model and --target-models both given"):
        mix_settings(Options(target_models="uniform:2", target_model="m.tar.gz"))
    with pytest.raises(UsageError, match="--inference-component and --inference-components both given"):
        mix_settings(Options(inference_components="a,b", inference_component="a"))
    with pytest.raises(UsageError, match="does not combine with --split 2"):
        mix_settings(Options(target_models="uniform:2"), split=2)
    with pytest.raises(UsageError, match="--seed must be a whole number"):
        mix_settings(Options(target_models="uniform:2", seed="x"))


# -- drawing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [[0.7, 0.3], [1, 0, 3, 2], zipf_weights(1.1, 1000), [5.0]])
def test_alias_table_encodes_the_weights_exactly(weights):
    table = AliasTable(weights)
    total = sum(weights)
    for got, want in zip(table.probabilities(), weights, strict=True):
        assert math.isclose(got, want / total, abs_tol=1e-12)


def test_a_zero_weight_is_never_drawn():
    picker = Picker([1.0, 0.0, 1.0], seed=3)
    assert 1 not in set(picker.sequence(5000))


def test_seventy_thirty_over_two_thousand_requests_within_three_points():
    for seed in range(5):
        counts = Counter(Picker([0.7, 0.3], seed=seed).sequence(2000))
        assert abs(counts[0] / 2000 - 0.7) <= 0.03, (seed, counts)


def test_zipf_frequencies_follow_the_weights():
    weights = zipf_weights(1.1, 100)
    counts = Counter(Picker(weights, seed=1).sequence(200_000))
    for rank in (0, 1, 9):
        assert abs(counts[rank] / 200_000 - weights[rank]) < 0.005


def test_the_same_seed_and_process_draw_the_same_sequence():
    weights = zipf_weights(1.0, 500)
    first = Picker(weights, seed=42, process=0).sequence(1000)
    assert Picker(weights, seed=42, process=0).sequence(1000) == first
    assert Picker(weights, seed=43, process=0).sequence(1000) != first
    assert Picker(weights, seed=42, process=1).sequence(1000) != first  # each worker its own stream
    assert stream_seed(42, 1) == "sm-locust-mix:42:1"


# -- the pool ----------------------------------------------------------------------------------------


def test_mixed_pool_sends_the_picked_target_under_the_endpoints_one_entry():
    bodies = PayloadPool([Invocation(b"1", target_variant=None), Invocation(b"2")], "two bodies")
    mix = parse_mix("a.tar.gz=0.7,b.tar.gz=0.3")
    pool = MixedPool(bodies, mix, seed=9)
    sent = [pool.next() for _ in range(2000)]
    assert [i.target_model for i in sent] == [mix.names[k] for k in Picker(mix.weights, 9).sequence(2000)]
    assert {i.body for i in sent} == {b"1", b"2"}  # the payload pool still picks the body
    assert {i.request_name("ep") for i in sent} == {"ep"}
    assert all(i.http_headers()["X-Amzn-SageMaker-Target-Model"] == i.target_model for i in sent[:10])
    assert all(i.boto3_kwargs()["TargetModel"] == i.target_model for i in sent[:10])
    assert sent[0] is next(i for i in sent[1:] if (i.body, i.target_model) == (sent[0].body, sent[0].target_model))
    assert len(pool) == 2 and pool.sizes()["count"] == 2


def test_mixed_pool_keeps_the_variant_in_the_entry_name_and_fills_components():
    bodies = PayloadPool([Invocation(b"1", target_variant="blue")], "one body")
    pool = MixedPool(bodies, parse_mix("ic1=1,ic2=1", "inference_component"), seed=1)
    sent = [pool.next() for _ in range(50)]
    assert {i.inference_component for i in sent} == {"ic1", "ic2"}
    assert {i.request_name("ep") for i in sent} == {"ep/blue"}
    assert sent[0].http_headers()["X-Amzn-SageMaker-Inference-Component"] in ("ic1", "ic2")
    assert Invocation(b"1", target_model="m").request_name("ep") == "ep/m"  # a single target keeps its entry


def test_the_web_ui_form_checks_a_changed_mix_and_keeps_the_command_lines_file(tmp_path):
    from sm_locust.locustfiles._webui import check_form_values

    path = tmp_path / "models.csv"
    path.write_text("a,1\n")
    check_form_values({"target_models": "zipf:1:10", "inference_components": "a=0.7,b=0.3"}, {})
    with pytest.raises(UsageError, match="--target-models 'zipf:1' is not zipf:S:N"):
        check_form_values({"target_models": "zipf:1"}, {})
    with pytest.raises(UsageError, match="only be given on the command line"):
        check_form_values({"target_models": str(path)}, {"target_models": ""})
    check_form_values({"target_models": str(path)}, {"target_models": str(path)})  # the command line's, sent back
    with pytest.raises(UsageError, match="the weights sum past the largest number"):  # was: AttributeError per task
        check_form_values({"target_models": "a=1e308,b=1e308"}, {})


@pytest.mark.parametrize("field, value, needle", [
    ("custom_attributes", "a=b\r\nX-Evil: 1", "--custom-attributes"),
    ("content_type", "application/jsön", "--content-type"),
    ("target_model", "modèle", "--target-model"),
    ("target_variant", "All Traffic", "--target-variant"),
    ("inference_component", "a.b", "--inference-component"),
    ("inference_id", "i" * 65, "--inference-id"),
])
def test_the_web_ui_form_holds_a_header_to_its_flags_rule(field, value, needle):
    """Was: accepted by the form, then every request failed (the round-4 probe's web UI cases)."""
    from sm_locust.locustfiles._webui import check_form_values

    with pytest.raises(UsageError, match=needle):
        check_form_values({field: value}, {})
    check_form_values({field: "fine-value1"}, {})


def test_a_bad_mix_from_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("SM_LOCUST_TARGET_MODELS", "a=1e308,b=1e308")
    with pytest.raises(UsageError, match=r"^SM_LOCUST_TARGET_MODELS \(read as --target-models 'a=1e308,b=1e308': the "
                                         r"weights sum past"):
        mix_settings(Options(target_models="a=1e308,b=1e308"))
    with pytest.raises(UsageError, match=r"^--target-models 'a=1e308,c=1e308'"):  # a flag of its own: named so
        mix_settings(Options(target_models="a=1e308,c=1e308"))
    monkeypatch.setenv("SM_LOCUST_INFERENCE_COMPONENTS", "x=1e308,y=1e308")
    with pytest.raises(UsageError, match=r"^SM_LOCUST_INFERENCE_COMPONENTS \(read as --inference-components"):
        mix_settings(Options(inference_components="x=1e308,y=1e308"))
