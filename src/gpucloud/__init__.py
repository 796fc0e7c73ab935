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

from gpucloud import compat as _compat

__version__ = "0.1.0"

# A library stays silent unless the application configures logging
# (`gpucloud --debug` does); without this, warnings would reach stderr.
_logging.getLogger("gpucloud").addHandler(_logging.NullHandler())

# The module paths of 0.1.0 (gpucloud.ssh, gpucloud.adapters.lambdalabs, ...)
# still import, as deprecated aliases of their new homes.
_compat.install()

# Public name -> the module that defines it, imported on first use.
_LAZY = {
    "Client": "gpucloud.client.sync_client",
    "AsyncClient": "gpucloud.client.async_client",
    "Offer": "gpucloud.models",
    "Instance": "gpucloud.models",
    "InstanceStatus": "gpucloud.models",
    "CostEstimate": "gpucloud.models",
    "CostLine": "gpucloud.models",
    "Attempt": "gpucloud.models",
    "Plan": "gpucloud.models",
    "ReapAction": "gpucloud.models",
    "ReapReport": "gpucloud.models",
    "UnclaimedMachine": "gpucloud.models",
    "Job": "gpucloud.models",
    "JobStatus": "gpucloud.models",
    "Connection": "gpucloud.models",
    "ExecResult": "gpucloud.models",
    "ServiceAccountToken": "gpucloud.models",
    "JobSpec": "gpucloud.jobs.spec",
    "CreateRequest": "gpucloud.batch.models",
    "BatchItem": "gpucloud.batch.models",
    "BatchResult": "gpucloud.batch.models",
    "BatchIncompleteError": "gpucloud.batch.models",
    "BatchBusyError": "gpucloud.errors",
    "ReconcileReport": "gpucloud.safety.reconcile",
    "LaunchIntent": "gpucloud.safety.reconcile",
    "Orphan": "gpucloud.safety.reconcile",
    "CostReport": "gpucloud.safety.costs",
    "SpendLine": "gpucloud.safety.costs",
    "parse_gpu": "gpucloud.catalog.gpus",
    "GpuCloudError": "gpucloud.errors",
    "ConfigurationError": "gpucloud.errors",
    "CredentialsError": "gpucloud.errors",
    "StateError": "gpucloud.errors",
    "SpecError": "gpucloud.errors",
    "UnknownGPUError": "gpucloud.errors",
    "BudgetExceededError": "gpucloud.errors",
    "ConfirmationRequired": "gpucloud.errors",
    "NoOffersError": "gpucloud.errors",
    "APIError": "gpucloud.errors",
    "APIConnectionError": "gpucloud.errors",
    "APITimeoutError": "gpucloud.errors",
    "APIStatusError": "gpucloud.errors",
    "AuthenticationError": "gpucloud.errors",
    "PermissionDeniedError": "gpucloud.errors",
    "NotFoundError": "gpucloud.errors",
    "BadRequestError": "gpucloud.errors",
    "ConflictError": "gpucloud.errors",
    "RateLimitError": "gpucloud.errors",
    "InternalServerError": "gpucloud.errors",
    "APIResponseValidationError": "gpucloud.errors",
    "InsufficientCapacityError": "gpucloud.errors",
    "OfferRefusedError": "gpucloud.errors",
    "QuotaExceededError": "gpucloud.errors",
    "WaitError": "gpucloud.errors",
    "InstanceFailedError": "gpucloud.errors",
    "WaitTimeoutError": "gpucloud.errors",
}

__all__ = [
    "__version__", "Client", "AsyncClient", "Offer", "Instance", "InstanceStatus",
    "CostEstimate", "CostLine", "Attempt", "Plan", "ReapAction", "ReapReport",
    "UnclaimedMachine",
    "Job", "JobStatus", "Connection", "ExecResult", "ServiceAccountToken", "JobSpec",
    "CreateRequest", "BatchItem",
    "BatchResult", "BatchIncompleteError", "BatchBusyError", "ReconcileReport", "LaunchIntent",
    "Orphan", "CostReport", "SpendLine",
    "parse_gpu",
    "GpuCloudError", "ConfigurationError", "CredentialsError", "StateError", "SpecError",
    "UnknownGPUError",
    "BudgetExceededError", "ConfirmationRequired", "NoOffersError", "APIError",
    "APIConnectionError", "APITimeoutError", "APIStatusError", "AuthenticationError",
    "PermissionDeniedError", "NotFoundError", "BadRequestError", "ConflictError",
    "RateLimitError", "InternalServerError", "APIResponseValidationError",
    "InsufficientCapacityError", "OfferRefusedError", "QuotaExceededError", "WaitError",
    "InstanceFailedError", "WaitTimeoutError",
]

if TYPE_CHECKING:  # pragma: no cover - what type checkers and IDEs see
    from gpucloud.batch.models import (
        BatchIncompleteError as BatchIncompleteError, BatchItem as BatchItem,
        BatchResult as BatchResult, CreateRequest as CreateRequest,
    )
    from gpucloud.client.async_client import AsyncClient as AsyncClient
    from gpucloud.client.sync_client import Client as Client
    from gpucloud.safety.costs import CostReport as CostReport, SpendLine as SpendLine
    from gpucloud.errors import (
        BatchBusyError as BatchBusyError, GpuCloudError as GpuCloudError,
        ConfigurationError as ConfigurationError,
        CredentialsError as CredentialsError, StateError as StateError, SpecError as SpecError,
        UnknownGPUError as UnknownGPUError, BudgetExceededError as BudgetExceededError,
        ConfirmationRequired as ConfirmationRequired, NoOffersError as NoOffersError,
        APIError as APIError, APIConnectionError as APIConnectionError,
        APITimeoutError as APITimeoutError, APIStatusError as APIStatusError,
        AuthenticationError as AuthenticationError,
        PermissionDeniedError as PermissionDeniedError, NotFoundError as NotFoundError,
        BadRequestError as BadRequestError, ConflictError as ConflictError,
        RateLimitError as RateLimitError, InternalServerError as InternalServerError,
        APIResponseValidationError as APIResponseValidationError,
        InsufficientCapacityError as InsufficientCapacityError,
        OfferRefusedError as OfferRefusedError, QuotaExceededError as QuotaExceededError,
        WaitError as WaitError, InstanceFailedError as InstanceFailedError,
        WaitTimeoutError as WaitTimeoutError,
    )
    from gpucloud.catalog.gpus import parse_gpu as parse_gpu
    from gpucloud.jobs.spec import JobSpec as JobSpec
    from gpucloud.safety.reconcile import (
        LaunchIntent as LaunchIntent, Orphan as Orphan, ReconcileReport as ReconcileReport,
    )
    from gpucloud.models import (
        Offer as Offer, Instance as Instance, InstanceStatus as InstanceStatus,
        CostEstimate as CostEstimate, CostLine as CostLine, Attempt as Attempt, Plan as Plan,
        ReapAction as ReapAction, ReapReport as ReapReport, Job as Job, JobStatus as JobStatus,
        UnclaimedMachine as UnclaimedMachine,
        Connection as Connection, ExecResult as ExecResult,
        ServiceAccountToken as ServiceAccountToken,
    )

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
