"""Verda runs a job from a start-up script: POST /scripts,
the launch with startup_script_id, then DELETE /scripts/{id} whatever the
launch answered. No OpenAPI exists: bodies are checked against the SDK's
(tests/fixtures/verda/create_startup_script_request_sdk.json) and a golden file."""

from __future__ import annotations

import json
import logging

import pytest

from gpucloud.errors import InsufficientCapacityError
from gpucloud.models import JobStatus
from tests.adapters._job_support import (
    DEADLINE,
    SECRET,
    assert_golden,
    assert_marked_and_keyless,
    make_job,
)
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    CLIENT_SECRET,
    INSTANCE_ID,
    api_fixture,
    body,
    error,
    instance_body,
    launch_routes,
    make_spec,
    provider_fixture,
    reply,
    run_fixture,
)

SCRIPT_ID = "5ec7c0de-a5d2-4972-ae4e-d429115d055b"


def script_routes(api, delete_answer=None):
    create = api.on("POST", "/scripts", reply(201, text=SCRIPT_ID))
    delete = api.on("DELETE", f"/scripts/{SCRIPT_ID}", delete_answer or reply(200))
    return create, delete


def paths(api) -> list[str]:
    return [f"{r.method} {r.url.path.removeprefix('/v1')}" for r in api.requests]


def test_job_launch_sends_the_golden_requests_and_deletes_the_script(api, run, provider):
    create, delete = script_routes(api)
    launch, _ = launch_routes(api)
    instance = run(provider.create(make_spec(launch_id="gj-0123456789", shutdown_at=DEADLINE,
                                             job=make_job())))
    assert instance.id == INSTANCE_ID
    assert paths(api) == ["GET /sshkeys", "POST /scripts", "POST /instances",
                          f"GET /instances/{INSTANCE_ID}", f"DELETE /scripts/{SCRIPT_ID}"]
    script_body = json.loads(create.calls.last.request.content)
    launch_body = json.loads(launch.calls.last.request.content)
    assert list(script_body) == list(body("create_startup_script_request_sdk"))
    assert launch_body["startup_script_id"] == SCRIPT_ID
    assert_golden("verda", {"POST /scripts": script_body, "POST /instances": launch_body},
                  ("POST /scripts", "script"))
    script = script_body["script"]
    assert "docker run --rm --name gpucloud-job --gpus all" in script
    assert "shutdown -h now" in script and f"export HF_TOKEN={SECRET}" in script
    assert_marked_and_keyless(create.calls.last.request, CLIENT_SECRET)
    assert SECRET.encode() not in launch.calls.last.request.content
    assert delete.call_count == 1


def test_a_refused_launch_still_deletes_the_script(api, run, provider):
    _, delete = script_routes(api)
    launch_routes(api, reply(400, error("invalid_request", "Not enough capacity for 1V100.6V")))
    with pytest.raises(InsufficientCapacityError) as caught:
        run(provider.create(make_spec(job=make_job())))
    assert delete.call_count == 1 and SECRET not in str(caught.value)


@pytest.mark.parametrize(("answer", "warned"), [(reply(404, error("not_found", "gone")), False),
                                               (reply(500, error("server_error", "boom")), True)])
def test_a_failed_script_delete_never_hides_the_billed_machine(api, run, provider, caplog,
                                                               answer, warned):
    script_routes(api, answer)
    launch_routes(api)
    with caplog.at_level(logging.WARNING, logger="gpucloud.verda"):
        instance = run(provider.create(make_spec(job=make_job())))
    assert instance.id == INSTANCE_ID
    assert ("could not delete start-up script" in caplog.text) is warned
    assert SECRET not in caplog.text


def test_a_plain_machine_creates_no_script(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec()))
    assert json.loads(launch.calls.last.request.content)["startup_script_id"] is None
    assert "POST /scripts" not in paths(api)


@pytest.mark.parametrize(("status", "job"), [
    ("running", JobStatus.RUNNING),
    # Powered off by the job's end: Verda shows "offline"; the outcome is unknown.
    ("offline", JobStatus.UNKNOWN),
])
def test_job_status_from_the_instance(api, run, provider, status, job):
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, instance_body(
        status=status, description="gpucloud launch_id=gj-1")))
    found = run(provider.get_job(INSTANCE_ID))
    assert found.status is job and found.launch_id == "gj-1"
