"""RunPod's part of the adapter tests (test_runpod_*.py), on tests/adapters/support.py:
the spec's example bodies in tests/fixtures/runpod, requests checked against the
trimmed official OpenAPI document (v2), errors answered as problem+json, the
GPU catalog and pod shapes the offers and creates are read from.

The fixtures here (api, provider, sleeps, run) are imported by each test module."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import httpx
from pydantic import SecretStr

from gpucloud.providers.runpod.adapter import RunPodProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec
from tests.adapters import support
from tests.adapters.support import run_fixture as run, sleeps_fixture as sleeps  # noqa: F401

_FILES = support.Fixtures("runpod")
FIXTURES = _FILES.path
SPEC = FIXTURES / "openapi-v2.json"
API = "https://api.runpod.io"
KEY = "rpa_secret-key-123"
POD_ID = "7h9k2m4n6p"
POD = f"/v2/pods/{POD_ID}"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
              " me@laptop")
A100 = "NVIDIA A100 80GB PCIe"


body = _FILES.body
reply = support.replies(error_content_type="application/problem+json")
api = support.checked_api(API, SPEC, KEY)
provider = support.provider_fixture(
    lambda: RunPodProvider(load_catalogs()["runpod"],
                           Credential("runpod", SecretStr(KEY), "test")))


def pod_body(**changes: Any) -> dict[str, Any]:
    return _FILES.changed("v2_get_pod_200_pod", **changes)


def gpu_type(gpu_id: str, name: str, memory: int, secure: float, community: float,
             max_secure: int, max_community: int, dcs: list[tuple[str, str]]) -> dict[str, Any]:
    """A GpuType shaped like the spec's example (v2_list_gpu_types_200_gpus.json)."""
    raw = copy.deepcopy(body("v2_list_gpu_types_200_gpus")["gpus"][0])
    raw.update(id=gpu_id, name=name, memory=memory, secure=secure > 0, community=community > 0,
               price={"secure": secure, "community": community},
               maxCount={"secure": max_secure, "community": max_community},
               availability="HIGH" if dcs else "NONE")
    raw["dataCenters"] = [{"id": i, "name": i, "availability": a} for i, a in dcs]
    if not dcs:
        del raw["dataCenters"]  # "omitted entirely when unavailable everywhere"
    return raw


def catalog_body(cloud: str) -> dict[str, Any]:
    """GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=<cloud>."""
    example = body("v2_list_gpu_types_200_gpus")["gpus"][0]  # RTX 4090, 0.44 / 0.31
    if cloud == "SECURE":
        return {"gpus": [
            example,
            gpu_type(A100, "A100 PCIe", 80, 1.39, 1.19, 8, 4,
                     [("US-KS-2", "HIGH"), ("EU-RO-1", "LOW"), ("US-TX-3", "NONE")]),
            gpu_type("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.1, 0, 8, 0,
                     [("US-KS-2", "MEDIUM")]),
            gpu_type("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.69, 0, 8, 0, []),
            gpu_type("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000", 96,
                     1.79, 0, 8, 0, [("EU-SE-1", "HIGH")]),
            gpu_type("Mystery GPU 9000", "Mystery", 12, 0.2, 0, 1, 0, [("US-KS-2", "LOW")]),
        ]}
    return {"gpus": [
        gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.44, 0.31, 8, 4,
                 [("EU-SE-1", "MEDIUM"), ("US-KS-2", "NONE")]),
        gpu_type(A100, "A100 PCIe", 80, 1.39, 1.19, 8, 4, [("CA-MTL-1", "HIGH")]),
        gpu_type("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.1, 0, 8, 0, []),
    ]}


def problem(status: int, title: str, detail: str, **extra: Any) -> Any:
    return reply(status, {"title": title, "status": status, "detail": detail, **extra})


def by_cloud(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=catalog_body(request.url.params["cloud"]))


def echo_pod(request: httpx.Request) -> httpx.Response:
    """A 201 shaped like the spec's example, carrying what the create asked for."""
    sent = json.loads(request.content)
    pod = copy.deepcopy(body("v2_create_pod_201_pod"))
    pod.update(name=sent["name"], image=sent["image"], env=sent["env"], gpu=sent["gpu"],
               cloud=sent["cloud"], dataCenterId=sent["dataCenterIds"][0],
               ports=sent["ports"], disk=sent.get("disk", 50))
    return httpx.Response(201, json=pod)


def make_spec(instance_type: str = f"2x {A100}", region: str = "US-KS-2", count: int = 2,
              **changes: Any) -> InstanceSpec:
    return support.instance_spec(
        dict(provider="runpod", instance_type=instance_type, region=region, gpu="A100-80GB",
             gpu_count=count, price_per_hour=Decimal("2.78")),
        changes, launch_id="gc-7f3a9c01", name="gpucloud-gc-7f3a9c01",
        image="runpod/pytorch:2.4")


def sent_json(request: httpx.Request) -> Any:
    return json.loads(request.content)
