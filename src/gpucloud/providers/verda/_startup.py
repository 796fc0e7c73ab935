"""A job's start-up script on Verda: an account-level object (``/scripts``,
sdk-python ``StartupScriptsService``), created for one launch and deleted
right after it.

Deleted at once because it holds the job's secrets and any key holder of the
account can read it. Not verified: whether Verda copies the script into the
instance when the order is placed (dstack keeps its script until the machine
is terminated). If it reads it only at boot, the job would not start and the
machine would idle until the reaper ends it at its deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpucloud.providers._jobscript import POWER_OFF, secret_values, vm_script
from gpucloud.providers.base import Flow, Provider
from gpucloud.providers.verda import _wire as wire

if TYPE_CHECKING:
    from gpucloud.models import JobRun

log = logging.getLogger("gpucloud.verda")


def create_script(provider: Provider, launch_id: str, job: JobRun,
                  mounts: Sequence[tuple[str, str]] = (),
                  setup: Sequence[str] = ()) -> Flow[str]:
    """POST /scripts {"name", "script"}: the new script's id (plain text).
    ``mounts``/``setup``: the job's volumes (see _volumes.py)."""
    response = yield provider.request(
        "POST", "/scripts", kind="unsafe", secrets=secret_values(job),
        json={"name": f"gpucloud-job-{launch_id}",
              "script": vm_script(job, POWER_OFF, mounts, setup)})
    provider.raise_for_error(response)
    script_id = wire.plain_id(response)
    if script_id is None:
        raise provider.invalid(response, "no start-up script id in the reply")
    return script_id


def delete_script(provider: Provider, script_id: str) -> Flow[None]:
    """DELETE /scripts/{id}; already gone is fine. Never raises: the launch it
    follows may have made a billed machine, which must still be reported."""
    from urllib.parse import quote

    try:
        response = yield provider.request("DELETE", f"/scripts/{quote(script_id, safe='')}",
                                          kind="idempotent")
        if response.is_error and response.status_code != 404:
            raise provider.map_error(response)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("verda: could not delete start-up script %s (it holds the job's env; "
                    "delete it in the console): %s", script_id, exc)
