"""The parts of a job file that say where it runs beyond one machine: how its
nodes are placed, and the volumes it mounts."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from gpucloud.jobs.spec_base import _NAME, _Spec


class Placement(_Spec):
    same_region: bool = Field(default=True,
                              description="All nodes in one region (a multi-node job). "
                                          "false is refused: NCCL across regions is not "
                                          "a training network.")
    interconnect: Literal["any", "infiniband"] = Field(
        default="any", description="infiniband: only offers and clusters with InfiniBand "
                                   "(or RoCE) between nodes; RDMA resources are requested "
                                   "where the provider names them.")

    @field_validator("same_region")
    @classmethod
    def _same(cls, value: bool) -> bool:
        if not value:
            raise ValueError("false is not supported: a multi-node job's nodes must share "
                             "one region (and network) for NCCL to reach between them")
        return value


class VolumeMount(_Spec):
    name: str = Field(description="The volume's name: an existing volume, or one the "
                                  "job creates when size_gb is given.")
    mount: str = Field(description="Absolute path inside the container.")
    size_gb: Optional[int] = Field(default=None, ge=1,
                                   description="Create the volume with this size "
                                               "(when no volume of that name exists).")
    delete_with_job: bool = Field(default=False,
                                  description="Delete the volume when the job ends "
                                              "(only for one the job created).")

    @field_validator("name")
    @classmethod
    def _vname(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r}: use lower-case letters, digits and '-', at most 63")
        return value

    @field_validator("mount")
    @classmethod
    def _mount(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") == "":
            raise ValueError(f"{value!r} must be an absolute path inside the container "
                             "(not /)")
        return value

    @model_validator(mode="after")
    def _delete_needs_size(self) -> VolumeMount:
        if self.delete_with_job and self.size_gb is None:
            raise ValueError("delete_with_job is only for a volume the job creates: "
                             "give size_gb too")
        return self


# The rendezvous variables every node of a multi-node job is given.
NODE_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "WORLD_SIZE",
            "GPUS_PER_NODE", "GPUCLOUD_NODE_ADDRS")
