"""Grid expansion (pure): every combination in file order, explicit configurations after the
grid's, identical settings once, labels naming what varies, keys stable across reorderings."""

from __future__ import annotations

from sm_locust.sweep.grid import configuration_key, expand, flatten, label_for


def test_every_combination_is_one_configuration_last_key_fastest():
    configs = expand({"service_time_ms": 40}, {"workers": [1, 2], "max_concurrency": [2, 5, 8]})
    assert [(c.settings["workers"], c.settings["max_concurrency"]) for c in configs] == [
        (1, 2), (1, 5), (1, 8), (2, 2), (2, 5), (2, 8)]
    assert [c.index for c in configs] == [1, 2, 3, 4, 5, 6]
    assert all(c.settings["service_time_ms"] == 40 for c in configs)
    assert configs[4].label == "workers 2, max_concurrency 5"
    assert configs[4].varying == {"workers": 2, "max_concurrency": 5}


def test_dotted_environment_keys_label_by_their_variable_name():
    configs = expand({"model_name": "m", "instance_type": "ml.c5.xlarge"},
                     {"environment.SAGEMAKER_MODEL_SERVER_WORKERS": [1, 2, 4],
                      "instance_type": ["ml.c5.xlarge", "ml.c5.2xlarge"]})
    assert len(configs) == 6
    assert configs[1].label == "SAGEMAKER_MODEL_SERVER_WORKERS 1, instance_type ml.c5.2xlarge"
    assert configs[1].settings["environment.SAGEMAKER_MODEL_SERVER_WORKERS"] == 1


def test_explicit_configurations_follow_the_grid_and_duplicates_are_dropped():
    configs = expand({"service_time_ms": 40}, {"max_concurrency": [2, 5]},
                     [{"max_concurrency": 5}, {"name": "batched", "max_concurrency": 2, "max_batch_size": 8},
                      {"environment": {"SAGEMAKER_MODEL_SERVER_WORKERS": 2}}])
    assert [c.label for c in configs][:3] == ["max_concurrency 2", "max_concurrency 5", "batched"]
    assert configs[2].settings == {"service_time_ms": 40, "max_concurrency": 2, "max_batch_size": 8}
    assert configs[3].settings["environment.SAGEMAKER_MODEL_SERVER_WORKERS"] == 2
    assert len(configs) == 4  # the explicit max_concurrency 5 equals the grid's


def test_a_single_explicit_configuration_is_labelled_by_its_own_settings():
    configs = expand({}, {}, [{"max_concurrency": 3}])
    assert configs[0].label == "max_concurrency 3"


def test_flatten_and_keys():
    assert flatten({"environment": {"A": 1, "B": {"C": 2}}, "x": 3}) == {"environment.A": 1, "environment.B.C": 2,
                                                                         "x": 3}
    assert configuration_key("local", {"a": 1, "b": 2}) == configuration_key("local", {"b": 2, "a": 1})
    assert configuration_key("local", {"a": 1}) != configuration_key("local", {"a": 2})


def test_run_folder_names_are_readable_and_stable():
    configs = expand({},
                     {"environment.SAGEMAKER_MODEL_SERVER_WORKERS": [2],
                      "instance_type": ["ml.c5.xlarge", "ml.g5.xlarge"]})
    slug = configs[0].slug("abcdef123456")
    assert slug == "instance_type-ml.c5.xlarge-abcdef"
    odd = expand({}, {"latency_ms": [1.5, 2.0]})
    assert odd[1].slug("0123456789ab") == "latency_ms-2-012345"


def test_a_label_spells_values_as_the_sweep_file_does():
    assert label_for({"scale_from_zero": True, "async.fetch": False, "environment.X": None, "memory": 2048.0}) == \
        "scale_from_zero true, fetch false, X null, memory 2048"
