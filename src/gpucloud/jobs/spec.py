"""The portable job spec: one YAML file (or Python object) for a training job
that runs unchanged on any provider.

Secrets are referenced by name, never written in the file: a value written
where a reference belongs is refused, so a job file can be committed and
shared. Errors from a YAML file name the file, the line and the field
(``job.yaml:12: resources.gpu: unknown GPU 'h1000' (did you mean H100?)``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import (Field, ValidationError, field_validator, model_validator)

from gpucloud.errors import SpecError
from gpucloud.jobs.spec_errors import At, first_error, more_problems

from gpucloud.jobs.spec_base import _ENV_NAME, _NAME, _Spec
from gpucloud.jobs.spec_nodes import NODE_ENV, Placement, VolumeMount


class SecretRef(_Spec):
    """Where a secret's value comes from: an environment variable of the
    submitting shell, or the system keyring ("<service>/<user>")."""

    env: Optional[str] = Field(default=None, description="Environment variable holding the value.")
    keyring: Optional[str] = Field(default=None,
                                   description='System keyring entry, "<service>/<user>".')

    @model_validator(mode="before")
    @classmethod
    def _a_reference(cls, value: Any) -> Any:
        if not isinstance(value, (dict, SecretRef)):
            # A value written into the file: refused, and never echoed.
            raise ValueError('write where the value is, not the value: {env: VAR} reads it '
                             'from your environment, {keyring: "service/user"} from the keyring')
        return value

    @model_validator(mode="after")
    def _one_source(self) -> SecretRef:
        if (self.env is None) == (self.keyring is None):
            raise ValueError("give exactly one of env or keyring")
        if self.env is not None and not _ENV_NAME.match(self.env):
            # Not echoed: a value pasted here by mistake must not reach a log.
            raise ValueError("env must be the name of an environment variable "
                             "(letters, digits and _), not its value")
        if self.keyring is not None:
            service, _, user = self.keyring.partition("/")
            if not service or not user:
                raise ValueError('keyring must be "<service>/<user>"')
        return self

    @property
    def source(self) -> str:
        return f"env {self.env}" if self.env is not None else f"keyring {self.keyring}"


class Resources(_Spec):
    gpu: str = Field(description="GPU model, e.g. H100, a100-80gb (`gpucloud gpus`).")
    gpu_count: int = Field(default=1, ge=1, le=64, description="GPUs on the machine.")
    cpu: Optional[float] = Field(default=None, gt=0, description="vCPUs at least.")
    memory_gb: Optional[float] = Field(default=None, gt=0, description="Memory in GB at least.")
    disk_gb: Optional[int] = Field(default=None, ge=1, description="Disk in GB.")

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        from gpucloud.catalog.gpus import parse_gpu

        try:
            return parse_gpu(value)
        except SpecError as exc:
            raise ValueError(f"{exc.message} ({exc.hint})") from None


class Checkpoint(_Spec):
    dir: str = Field(default="/checkpoints",
                     description="Directory exposed to the job as CHECKPOINT_DIR.")
    url: Optional[str] = Field(default=None,
                               description="Object storage the directory is synced to "
                                           "(s3://bucket/path, gs://bucket/path, or an "
                                           "rclone remote:path), so a retried or "
                                           "preempted job resumes.")
    sync_interval: Optional[str] = Field(default=None,
                                         description="How often it is synced, e.g. 10m.")

    @field_validator("dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} must be an absolute path inside the container")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: Optional[str]) -> Optional[str]:
        # The runner syncs with aws (s3://), gsutil (gs://) or rclone (remote:path).
        if value is not None and not (re.match(r"^(s3|gs)://[^/\s]+", value)
                                      or re.match(r"^[A-Za-z0-9_.-]+:(?!//)\S*$", value)):
            raise ValueError(f"{value!r} is not a storage URL the job can sync to: use "
                             "s3://bucket/path, gs://bucket/path or an rclone remote:path")
        return value

    @field_validator("sync_interval", mode="before")
    @classmethod
    def _interval(cls, value: Optional[str]) -> Optional[str]:
        return _duration(value)


class JobSpec(_Spec):
    """A portable job: what runs (image, command), on what (resources), how
    long and for how much at most; secrets by reference only."""

    name: str = Field(description="Lower-case letters, digits and '-' (at most 63).")
    image: str = Field(description="Container image, e.g. "
                                   "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime.")
    command: list[str] = Field(default_factory=list,
                               description="Replaces the image's entrypoint when given.")
    args: list[str] = Field(default_factory=list, description="Arguments to the command.")
    env: dict[str, str] = Field(default_factory=dict,
                                description="Plain environment variables (no secrets).")
    secrets: dict[str, SecretRef] = Field(
        default_factory=dict,
        description="Environment variables whose values are read at submit time from your "
                    "environment or keyring: NAME: {env: VAR} or NAME: {keyring: service/user}.")
    resources: Resources
    provider: Optional[str] = Field(default=None,
                                    description="Only this provider (default: cheapest).")
    region: Optional[str] = Field(default=None, description="Only this region.")
    max_runtime: Optional[str] = Field(default=None,
                                       description="Deadline after submission, e.g. 6h; "
                                                   "the machine is ended then.")
    max_cost: Optional[Decimal] = Field(default=None, gt=0,
                                        description="USD: refuse if the estimate "
                                                    "exceeds it (without max_runtime: "
                                                    "the deadline is when it is spent).")
    retries: int = Field(default=0, ge=0, le=20, description="Times a failed or preempted job is "
                                                      "run again (where the provider can).")
    spot: bool = Field(default=False, description="Spot/interruptible capacity (checkpoint!).")
    checkpoint: Optional[Checkpoint] = Field(default=None,
                                             description="Checkpointing, so a retried "
                                                         "job resumes.")
    nodes: int = Field(default=1, ge=1, le=64,
                       description="Machines (nodes) the job spans, each with "
                                   "resources.gpu_count GPUs. Every node gets MASTER_ADDR, "
                                   "MASTER_PORT, NODE_RANK, NNODES, WORLD_SIZE (nodes x GPUs "
                                   "per node), GPUS_PER_NODE and GPUCLOUD_NODE_ADDRS, so "
                                   "`torchrun --nnodes=$NNODES --node_rank=$NODE_RANK "
                                   "--master_addr=$MASTER_ADDR ...` runs as written.")
    placement: Placement = Field(default_factory=Placement,
                                 description="Where the nodes go (a multi-node job).")
    volumes: list[VolumeMount] = Field(default_factory=list,
                                       description="Volumes mounted into the container: "
                                                   "{name, mount} for an existing one, "
                                                   "{name, size_gb, mount, delete_with_job} "
                                                   "for one the job creates.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r}: use lower-case letters, digits and '-', at most 63")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not a container image reference")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not an environment variable name")
            if key == "CHECKPOINT_DIR":
                raise ValueError("CHECKPOINT_DIR is set from checkpoint.dir")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: dict[str, SecretRef]) -> dict[str, SecretRef]:
        for key in value:
            if not _ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @field_validator("max_runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Optional[str]) -> Optional[str]:
        return _duration(value)

    @field_validator("max_cost", mode="before")
    @classmethod
    def _money(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError("write money as a string or a Decimal (0.1 is not a price)")
        return value

    @model_validator(mode="after")
    def _no_clash(self) -> JobSpec:
        both = sorted(set(self.env) & set(self.secrets))
        if both:
            raise At(("secrets", both[0]), f"{', '.join(both)} is both in env and in secrets")
        if self.nodes > 1:
            taken = sorted((set(self.env) | set(self.secrets)) & set(NODE_ENV))
            if taken:
                raise At(("env" if taken[0] in self.env else "secrets", taken[0]),
                         f"{', '.join(taken)} is set by gpucloud on every node of a "
                         "multi-node job: remove it from env/secrets")
        names = [v.name for v in self.volumes]
        mounts = [v.mount.rstrip("/") for v in self.volumes]
        for label, items in (("name", names), ("mount", mounts)):
            again = next((i for i, item in enumerate(items) if item in items[:i]), None)
            if again is not None:
                raise At(("volumes", again, label),
                         f"{label} {items[again]!r} is given twice")
        return self

    @property
    def max_runtime_seconds(self) -> Optional[int]:
        from gpucloud.catalog.pricing import parse_duration

        return int(parse_duration(self.max_runtime).total_seconds()) if self.max_runtime else None


def _duration(value: Any) -> Optional[str]:
    if value is None:
        return None
    from gpucloud.catalog.pricing import parse_duration

    if isinstance(value, timedelta):
        value = f"{int(value.total_seconds())}s"
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration: write it with a unit, e.g. 6h, 90m")
    try:
        parse_duration(value)
    except SpecError as exc:
        raise ValueError(exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
    return value


def schema() -> dict[str, Any]:
    """The JSON Schema of a job file (for editors: completion and checks)."""
    out = JobSpec.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["title"] = "gpucloud job"
    return out


# -- YAML ------------------------------------------------------------------------


def load(path: Union[str, Path]) -> JobSpec:
    """A JobSpec from a YAML file; SpecError naming the file, line and field."""
    from gpucloud.config.file_limits import MIB, InputLimitError, read_limited

    path = Path(path)
    try:
        text = read_limited(path, MIB)
    except FileNotFoundError:
        raise SpecError(f"no job file {path}", hint="give the path of a job YAML file") from None
    except InputLimitError as exc:
        raise SpecError(f"job file {path} is {exc}", hint=_limits_hint()) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read job file {path}: {exc}") from None
    return loads(text, str(path))


def _limits_hint() -> str:
    from gpucloud.config.safe_yaml import limits_text

    return f"a job file is {limits_text()}"


def loads(text: str, where: str = "<job>") -> JobSpec:
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

    from gpucloud.jobs.yaml_lines import Loader, line_of
    from gpucloud.config.safe_yaml import YamlLimitError, compose_and_load

    try:
        node, data = compose_and_load(text, Loader)
    except YamlLimitError as exc:
        raise SpecError(f"{where}: refused: {exc}", hint=_limits_hint()) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{where}{line}: not valid YAML: {exc.problem or exc.context}",
                        hint="check the indentation and quoting on that line") from None
    except (yaml.YAMLError, ValueError) as exc:
        raise SpecError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}:1: a job file is a mapping (name:, image:, resources:, ...)",
                        hint="`gpucloud schema job` prints every field")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(first_error(exc, JobSpec, where, lambda loc: line_of(node, loc)),
                        hint=more_problems(exc)
                        or "`gpucloud schema job` prints every field") from None


def from_any(spec: Any) -> JobSpec:
    """A JobSpec, a path to a YAML file, or a dict."""
    if isinstance(spec, JobSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return load(spec)
    if isinstance(spec, dict):
        try:
            return JobSpec.model_validate(spec)
        except ValidationError as exc:
            raise SpecError(first_error(exc, JobSpec, "job"), hint=more_problems(exc)) from None
    raise SpecError(f"not a job spec: {type(spec).__name__}",
                    hint="give a JobSpec, a dict or the path of a job YAML file")


__all__ = ["Checkpoint", "JobSpec", "NODE_ENV", "Placement", "Resources", "SecretRef",
           "VolumeMount", "load", "loads", "schema"]
