"""Inference Recommender TrafficPattern -> schedule; stopping conditions; bad patterns are usage errors."""

import json

import pytest

from sm_locust.errors import UsageError
from sm_locust.plateau.conditions import LatencySLO, MaxInvocationsPerMinute, ThroughputGain
from sm_locust.plateau.traffic import parse_traffic_pattern

# The Triton article's pattern: 2 initial users, 2 new users per minute, 25 minutes.
TRITON = {"TrafficType": "PHASES", "Phases": [{"InitialNumberOfUsers": 2, "SpawnRate": 2, "DurationInSeconds": 1500}]}


def test_triton_example_schedule():
    schedule = parse_traffic_pattern(TRITON)
    assert schedule.traffic_type == "PHASES" and schedule.duration_s == 1500 and schedule.warnings == []
    assert schedule.at(0) == (2, 2.0)  # start: 2 users at once
    assert schedule.at(29.9)[0] == 2
    assert schedule.at(30) == (3, 1.0)  # SpawnRate 2 per MINUTE: one new user every 30 s
    assert schedule.at(60)[0] == 4
    assert schedule.at(600)[0] == 22
    assert schedule.at(1499)[0] == 51
    assert schedule.at(1500) is None
    assert schedule.max_users == 51
    assert schedule.describe() == "PHASES: 2 users +2/min for 1500 s (to 51)"


def test_triton_example_as_json_text_and_with_typographic_quotes():
    assert parse_traffic_pattern(json.dumps({"TrafficPattern": TRITON})).at(30)[0] == 3
    article = "\u201cTrafficPattern\u201d: {\u201cTrafficType\u201d: \u201cPHASES\u201d}"
    with pytest.raises(UsageError, match="typographic quotes"):
        parse_traffic_pattern(article)


def test_ir_documented_ramp_one_to_ten():
    # IR guide: InitialNumberOfUsers 1, SpawnRate 1, 600 s -> "1 concurrent user at the beginning and 10 at the end"
    schedule = parse_traffic_pattern({"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1,
                                                  "DurationInSeconds": 600}]})
    assert schedule.at(0)[0] == 1 and schedule.at(599)[0] == 10


def test_ir_guide_two_phases_with_job_request_wrapper():
    request = {
        "JobType": "Advanced",
        "InputConfig": {
            "JobDurationInSeconds": 500,
            "TrafficPattern": {"TrafficType": "PHASES", "Phases": [
                {"InitialNumberOfUsers": 1, "SpawnRate": 60, "DurationInSeconds": 300},
                {"InitialNumberOfUsers": 5, "SpawnRate": 1, "DurationInSeconds": 300},
            ]},
        },
        "StoppingConditions": {"MaxInvocations": 1000,
                               "ModelLatencyThresholds": [{"Percentile": "P95", "ValueInMilliseconds": 100}]},
    }
    schedule = parse_traffic_pattern(request)
    assert schedule.at(1) == (2, 1.0) and schedule.at(299)[0] == 300
    assert schedule.at(300) == (5, 295.0)  # next phase restarts at its own initial users, at once
    assert schedule.at(359)[0] == 5 and schedule.at(360)[0] == 6
    assert any("InitialNumberOfUsers 5" in w for w in schedule.warnings)
    assert any("JobDurationInSeconds 500" in w for w in schedule.warnings)
    kinds = {type(c): c for c in schedule.stopping.conditions()}
    assert kinds[MaxInvocationsPerMinute].per_minute == 1000
    assert kinds[LatencySLO].percentile == 95 and kinds[LatencySLO].max_ms == 100
    assert ThroughputGain in kinds  # FlatInvocations defaults to Stop


def test_stairs():
    schedule = parse_traffic_pattern({"TrafficType": "STAIRS",
                                      "Stairs": {"DurationInSeconds": 60, "NumberOfSteps": 3, "UsersPerStep": 2}})
    assert [schedule.at(t)[0] for t in (0, 59, 60, 119, 120, 179)] == [2, 2, 4, 4, 6, 6]
    assert schedule.at(60) == (4, 2.0) and schedule.at(180) is None and schedule.duration_s == 180


def test_spawn_rate_per_second_reading():
    pattern = {"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 120}]}
    assert parse_traffic_pattern(pattern, spawn_unit="second").at(10)[0] == 11
    with pytest.raises(UsageError, match="spawn unit"):
        parse_traffic_pattern(pattern, spawn_unit="hour")


def test_flat_invocations_continue_and_p99():
    schedule = parse_traffic_pattern({"TrafficPattern": TRITON, "StoppingConditions": {
        "FlatInvocations": "Continue", "ModelLatencyThresholds": [{"Percentile": "P99", "ValueInMilliseconds": 250}]}})
    assert [type(c) for c in schedule.stopping.conditions()] == [LatencySLO]
    assert any("P95" in w for w in schedule.warnings)


PHASE = {"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 120}


@pytest.mark.parametrize("pattern,message", [
    ({"TrafficType": "PHASES", "Phases": [PHASE], "Stairs": {}}, "both Phases and Stairs"),
    ({"TrafficType": "RAMP", "Phases": [PHASE]}, "TrafficType is 'RAMP'"),
    ({"TrafficType": "PHASES"}, "needs a Phases list"),
    ({"TrafficType": "STAIRS", "Phases": [PHASE]}, "needs a Stairs object"),
    ({}, "needs Phases"),
    ({"Phases": []}, "at least one phase"),
    ({"Phases": [{**PHASE, "InitialNumberOfUsers": 0}]}, r"Phases\[0\].InitialNumberOfUsers is 0; IR requires >= 1"),
    ({"Phases": [PHASE, {**PHASE, "SpawnRate": -1}]}, r"Phases\[1\].SpawnRate is -1"),
    ({"Phases": [{**PHASE, "DurationInSeconds": "60"}]}, "must be a whole number, got '60'"),
    ({"Phases": [{**PHASE, "DurationInSeconds": 1.5}]}, "must be a whole number"),
    ({"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1}]}, r"Phases\[0\] needs DurationInSeconds"),
    ({"Phases": [{**PHASE, "Duration": 60}]}, "unknown key 'Duration'"),
    ({"Phases": [5]}, r"Phases\[0\] must be an object"),
    ({"Stairs": {"DurationInSeconds": 60, "NumberOfSteps": 3, "UsersPerStep": 4}}, "between 1 and 3"),
])
def test_rule_breaking_patterns(pattern, message):
    with pytest.raises(UsageError, match=message):
        parse_traffic_pattern(pattern)


@pytest.mark.parametrize("stopping,message", [
    ({"ModelLatencyThresholds": [{"Percentile": "P50", "ValueInMilliseconds": 100}]}, "IR accepts P95 or P99"),
    ({"ModelLatencyThresholds": [{"Percentile": "P95", "ValueInMilliseconds": 1},
                                 {"Percentile": "P99", "ValueInMilliseconds": 2}]}, "exactly one"),
    ({"ModelLatencyThresholds": [{"Percentile": "P95", "ValueInMilliseconds": 0}]}, "ValueInMilliseconds is 0"),
    ({"MaxInvocations": 0}, "MaxInvocations is 0"),
    ({"FlatInvocations": "Maybe"}, "Stop or Continue"),
    ({"CompletionCriteria": {}}, "unknown key 'CompletionCriteria'"),
])
def test_bad_stopping_conditions(stopping, message):
    with pytest.raises(UsageError, match=message):
        parse_traffic_pattern({"TrafficPattern": TRITON, "StoppingConditions": stopping})


@pytest.mark.parametrize("text,message", [
    ('{"TrafficType": "PHASES", "Phases": [{"InitialNumberOfUsers": 2,},]}', "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
])
def test_bad_json(text, message):
    with pytest.raises(UsageError, match=message):
        parse_traffic_pattern(text)


def test_usage_error_message_is_one_line():
    with pytest.raises(UsageError) as info:
        parse_traffic_pattern('{"Phases": [{"InitialNumberOfUsers": 2,,}]}')
    assert "\n" not in str(info.value) and info.value.exit_code == 2
