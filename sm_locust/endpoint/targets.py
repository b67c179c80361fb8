"""What the local endpoint hosts and how a request names it: one model (the default), many models
behind TargetModel (`--multi-model`, endpoint/multimodel.py), inference components behind
InferenceComponentName (`--inference-components`, endpoint/components.py), or an LLM's base component
and its LoRA adapter components (`--llm --llm-adapters`, endpoint/adapters.py).

Why one module: SageMaker checks these headers against what the endpoint is before any model
work, and each kind of endpoint refuses the other kinds' header with its own ValidationError
(docs/facts.md). `router_for` gives `EndpointApp` the one object that checks a request's headers
(`check`) and, for the two emulations, serves it (`serve`); `shared_state` is what the gunicorn
master makes before forking so every worker shares one cache or one table of copies.
"""

from __future__ import annotations

from typing import Any

from sm_locust.endpoint import adapters
from sm_locust.endpoint.components import COMPONENT_ENVIRON, ComponentRouter, ComponentTable
from sm_locust.endpoint.multimodel import TARGET_MODEL_ENVIRON, MultiModelEmulator, shared_store

NOT_MULTI_MODEL = "Endpoint {name} is not a multi-model endpoint and does not support target model header."
COMPONENT_NOT_ALLOWED = ("Inference Component Name header is not allowed for endpoints to which you dont plan to "
                         "deploy inference components. Please remove the Inference Component Name header and try "
                         "again.")


class SingleModel:
    """An endpoint with one model: TargetModel and InferenceComponentName are refused."""

    serves = False

    def __init__(self, endpoint_name: str | None):
        self.endpoint_name = endpoint_name

    def check(self, environ, endpoint_name: str | None = None) -> tuple[str, str] | None:
        if environ.get(TARGET_MODEL_ENVIRON):
            return "ValidationError", NOT_MULTI_MODEL.format(name=endpoint_name or self.endpoint_name or "local")
        if environ.get(COMPONENT_ENVIRON):
            return "ValidationError", COMPONENT_NOT_ALLOWED
        return None

    def serve(self, environ, start_response, answer, error) -> list:
        """The one model answers (EndpointApp serves it directly: `serves` is False)."""
        return answer(start_response)

    def stats(self) -> dict:
        return {}


class MultiModel(SingleModel):
    """A multi-model endpoint: every request names a hosted model; components are refused."""

    serves = True

    def __init__(self, emulator: MultiModelEmulator):
        self.emulator = emulator

    def check(self, environ, endpoint_name: str | None = None) -> tuple[str, str] | None:
        if environ.get(COMPONENT_ENVIRON):
            return "ValidationError", COMPONENT_NOT_ALLOWED
        return self.emulator.check(environ)

    def serve(self, environ, start_response, answer, error) -> list:
        return self.emulator.serve(environ, start_response, answer, error)

    def loaded_count(self) -> int:
        return self.emulator.loaded_count()

    def stats(self) -> dict:
        return self.emulator.stats()


class Components(SingleModel):
    """An endpoint with inference components: every request names a hosted component; TargetModel is refused."""

    serves = True

    def __init__(self, router: ComponentRouter, endpoint_name: str | None):
        self.router = router
        self.endpoint_name = endpoint_name

    def check(self, environ, endpoint_name: str | None = None) -> tuple[str, str] | None:
        if environ.get(TARGET_MODEL_ENVIRON):
            return "ValidationError", NOT_MULTI_MODEL.format(name=endpoint_name or self.endpoint_name or "local")
        return self.router.check(environ)

    def serve(self, environ, start_response, answer, error) -> list:
        return self.router.serve(environ, start_response, answer, error)

    def stats(self) -> dict:
        return self.router.stats()


class Adapters(SingleModel):
    """An LLM's base component and its LoRA adapter components (`serve --llm --llm-adapters`): every request
    names one; an adapter waits for its load (endpoint/adapters.py); TargetModel is refused."""

    serves = True

    def __init__(self, cache: adapters.AdapterCache, endpoint_name: str | None):
        self.cache = cache
        self.endpoint_name = endpoint_name

    def check(self, environ, endpoint_name: str | None = None) -> tuple[str, str] | None:
        if environ.get(TARGET_MODEL_ENVIRON):
            return "ValidationError", NOT_MULTI_MODEL.format(name=endpoint_name or self.endpoint_name or "local")
        return self.cache.check(environ)

    def serve(self, environ, start_response, answer, error) -> Any:
        return self.cache.serve(environ, start_response, answer, error)

    def stats(self) -> dict:
        return self.cache.stats()


def _adapter_spec(config: object) -> adapters.AdapterSpec | None:
    llm = getattr(config, "llm", None)
    return llm.adapter_spec() if llm is not None else None


def shared_state(config: Any) -> Any:
    """What `serve_forever` makes before the fork: the MME's cache store, the components' table, the LLM's
    adapter cache, or None."""
    if getattr(config, "multi_model", None) is not None:
        return shared_store(config.multi_model)
    spec = _adapter_spec(config)
    if spec is not None:
        return adapters.shared_store(spec)
    if getattr(config, "inference_components", None):
        return ComponentTable(config.inference_components)
    return None


def router_for(config: Any, counters, shared: Any = None) -> SingleModel:
    """The router an endpoint worker uses for `config` (shared: from `shared_state`, made before the fork)."""
    if getattr(config, "multi_model", None) is not None:
        return MultiModel(MultiModelEmulator(config.multi_model, counters, shared))
    if getattr(config, "inference_components", None):
        router = ComponentRouter(config.inference_components, shared,
                                 default_service_ms=float(getattr(config, "service_time_ms", 0.0) or 0.0))
        return Components(router, getattr(config, "endpoint_name", None))
    spec = _adapter_spec(config)
    if spec is not None:
        return Adapters(adapters.AdapterCache(spec, shared), getattr(config, "endpoint_name", None))
    return SingleModel(getattr(config, "endpoint_name", None))


def loaded_models_reader(config: Any, shared: Any):
    """For the CloudWatch publisher in the master: a callable giving LoadedModelCount, or None."""
    if getattr(config, "multi_model", None) is None or shared is None:
        return None
    emulator = MultiModelEmulator(config.multi_model, counters=None, store=shared)
    return emulator.loaded_count
