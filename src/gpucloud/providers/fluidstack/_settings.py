"""Which Fluidstack project and region: the environment first, then config.toml.

    [fluidstack]
    project_id = "123e4567-e89b-12d3-a456-426614174003"   # GPUCLOUD_FLUIDSTACK_PROJECT_ID
    region = "<region>"                                   # GPUCLOUD_FLUIDSTACK_REGION

Every instance call names its project (header ``X-PROJECT-ID``), and each
region has its own API host (``https://<region>.atlas.fluidstack.io``). Neither
is a secret, so neither lives in the keyring: the token does.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from gpucloud.errors import ConfigurationError

PROJECT_ENV = "GPUCLOUD_FLUIDSTACK_PROJECT_ID"
REGION_ENV = "GPUCLOUD_FLUIDSTACK_REGION"
# A region is one DNS label of the API host.
_REGION = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Settings:
    project_id: str | None = None
    region: str | None = None


def load(environ: Mapping[str, str] | None = None) -> Settings:
    from gpucloud.config import settings as config_mod

    env = os.environ if environ is None else environ
    section = config_mod.load_config().raw.get("fluidstack", {})
    if not isinstance(section, dict):
        raise ConfigurationError("config.toml [fluidstack] must be a table")
    project = env.get(PROJECT_ENV, "").strip() or section.get("project_id")
    region = env.get(REGION_ENV, "").strip() or section.get("region")
    if project is not None:
        try:
            project = str(uuid.UUID(str(project)))
        except ValueError:
            raise ConfigurationError(
                f"the fluidstack project id must be a UUID, got {str(project)[:60]!r}",
                hint=f"set {PROJECT_ENV} or config.toml [fluidstack] project_id to the "
                     "project's id (Fluidstack's console lists it)") from None
    if region is not None and not _REGION.fullmatch(str(region)):
        raise ConfigurationError(
            f"the fluidstack region must be a lowercase host label, got {str(region)[:60]!r}",
            hint=f"set {REGION_ENV} or config.toml [fluidstack] region")
    return Settings(project_id=project, region=str(region) if region is not None else None)


def missing(what: str, env: str, key: str) -> ConfigurationError:
    return ConfigurationError(f"fluidstack needs a {what}",
                              hint=f"set {env}, or {key} under [fluidstack] in config.toml")
