"""Locust's option names are computed once per Locust process (config/locust_parser.py
`cache_default_args`): a worker looks them up once per option the master sends, on every spawn
message, and each lookup built and parsed a whole parser, holding the worker's loop."""

from __future__ import annotations

from types import SimpleNamespace

import locust  # noqa: F401  (gevent patching first)
from locust import argument_parser

from sm_locust.config.locust_parser import cache_default_args


def test_computed_once_and_handed_out_as_copies():
    calls = []

    def default_args_dict():
        calls.append(1)
        return {"users": 1, "spawn_rate": 1.0}

    module = SimpleNamespace(default_args_dict=default_args_dict)
    cache_default_args(module)
    cache_default_args(module)  # twice (a parser built twice): still one computation
    sent = {f"option_{i}": i for i in range(145)} | {"users": 3}
    custom = {k: v for k, v in sent.items() if k not in module.default_args_dict()}  # as Locust's worker does
    assert len(custom) == 145 and "users" not in custom
    assert len(calls) == 1
    first = module.default_args_dict()
    first["users"] = 99  # a caller's copy
    assert module.default_args_dict() == {"users": 1, "spawn_rate": 1.0}


def test_the_locustfiles_parser_caches_locusts_own():
    from sm_locust.locustfiles.sagemaker import _register_options

    _register_options(argument_parser.get_empty_argument_parser())
    assert getattr(argument_parser.default_args_dict, "computed_once", False)
    names = argument_parser.default_args_dict()
    assert "num_users" in names and "endpoint_name" not in names  # Locust's own options, none of sm-locust's
