"""A listing of volumes or jobs across providers: one provider that cannot
answer is a warning naming it, the others' items are still listed; asked for
alone, or when none answers, its error is raised ("nothing there" must never
mean "could not look"). RunPod answers 403 at the transport (respx)."""

from __future__ import annotations

import httpx
import pytest
import respx

from gpucloud import Client
from gpucloud.errors import GpuCloudError


@pytest.fixture
def runpod_refuses(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", "runpod-key-that-is-refused")
    with respx.mock(assert_all_called=False) as router:
        router.route(host="api.runpod.io").mock(return_value=httpx.Response(
            403, json={"error": "forbidden"}))
        yield


def test_volumes_of_the_providers_that_answer_with_a_warning_for_the_one_that_did_not(
        runpod_refuses):
    with Client(providers=["sandbox", "runpod"]) as client:
        made = client.create_volume(name="data", size_gb=10, provider="sandbox",
                                    region="sim-east-1")
        listed = client.volumes()
        assert [v.id for v in listed] == [made.id]
        assert [w for w in client.warnings if w.startswith("runpod: could not list volumes")]
        with pytest.raises(GpuCloudError):
            client.volumes(provider="runpod")


def test_jobs_of_the_providers_that_answer_with_a_warning_for_the_one_that_did_not(
        runpod_refuses):
    with Client(providers=["sandbox", "runpod"]) as client:
        assert client.jobs() == []
        assert [w for w in client.warnings if w.startswith("runpod: could not list jobs")]
        with pytest.raises(GpuCloudError):
            client.jobs(provider="runpod")
