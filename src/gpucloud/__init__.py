"""gpucloud: GPU instances across GPU clouds through one interface.

    from gpucloud import Client
    client = Client()
    offer = client.offers(gpu="h100", count=8)[0]

Names are loaded lazily so that ``gpucloud --help`` never pays for httpx,
pydantic or the adapters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import logging as _logging

__version__ = "0.1.0"

# A library stays silent unless the application configures logging
# (`gpucloud --debug` does); without this, warnings would reach stderr.
_logging.getLogger("gpucloud").addHandler(_logging.NullHandler())

_LAZY = {
    "Client": "gpucloud.client",
    "AsyncClient": "gpucloud.client",
    "Offer": "gpucloud.models",
    "Instance": "gpucloud.models",
    "InstanceStatus": "gpucloud.models",
    "CostEstimate": "gpucloud.models",
    "CostLine": "gpucloud.models",
    "Attempt": "gpucloud.models",
    "Plan": "gpucloud.models",
    "parse_gpu": "gpucloud.gpus",
}
_ERRORS = (
    "GpuCloudError", "ConfigurationError", "CredentialsError", "StateError", "SpecError", "UnknownGPUError",
    "BudgetExceededError", "ConfirmationRequired", "NoOffersError", "APIError", "APIConnectionError",
    "APITimeoutError", "APIStatusError", "AuthenticationError", "PermissionDeniedError",
    "NotFoundError", "BadRequestError", "ConflictError", "RateLimitError", "InternalServerError",
    "APIResponseValidationError", "InsufficientCapacityError", "OfferRefusedError", "QuotaExceededError",
    "WaitError", "InstanceFailedError", "WaitTimeoutError",
)
_LAZY.update({name: "gpucloud.errors" for name in _ERRORS})

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover
    from .client import AsyncClient, Client
    from .errors import *  # noqa: F403
    from .gpus import parse_gpu
    from .models import Attempt, CostEstimate, CostLine, Instance, InstanceStatus, Offer


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpucloud' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
