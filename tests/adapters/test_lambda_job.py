"""Lambda runs a job from cloud-init user_data: the exact
launch request (golden file, validated against the 1.8.3 OpenAPI fixture),
the runner it carries, and what a job's status can say."""

from __future__ import annotations

import pytest

from gpucloud.providers.base import job_of
from gpucloud.errors import BadRequestError, SpecError
from gpucloud.models import JobStatus
from tests.adapters._job_support import (
    DEADLINE,
    SECRET,
    assert_golden,
    assert_marked_and_keyless,
    make_job,
)
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    KEY,
    api,
    body,
    instance_body,
    launch_body,
    launch_routes,
    make_spec,
    provider,
    reply,
    run,
    sleeps,
)


def test_job_launch_sends_exactly_the_golden_request(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(launch_id="gj-7f3a9c", name="train-resnet",
                                  shutdown_at=DEADLINE, job=make_job())))
    sent = launch_body(launch.calls.last.request)
    assert_golden("lambda", sent, ("user_data",))
    script = sent["user_data"]
    assert script.startswith("#!/bin/sh\n")  # cloud-init runs a user-data script as is
    assert "docker run --rm --name gpucloud-job --gpus all" in script
    assert "-v /checkpoints:/checkpoints" in script and "shutdown -h now" in script
    assert "GC_LIMIT=7200" in script
    # The secret is set by the script (the launch request is its only way in).
    assert f"export HF_TOKEN={SECRET}" in script
    assert_marked_and_keyless(launch.calls.last.request, KEY)


def test_a_plain_machine_carries_no_user_data_and_marks_nothing(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec()))
    request = launch.calls.last.request
    assert "user_data" not in launch_body(request)
    assert request.extensions["gpucloud_secrets"] == ()


def test_a_refused_job_launch_does_not_echo_the_secret(api, run, provider):
    launch_routes(api, reply(400, body("error_invalid_parameters_400")))
    with pytest.raises(BadRequestError) as caught:
        run(provider.create(make_spec(job=make_job())))
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)


def test_a_script_over_one_megabyte_is_refused_before_any_request(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(SpecError, match="1 MB"):
        run(provider.create(make_spec(job=make_job(args=("x" * (1024 * 1024),)))))
    assert launch.call_count == 0


@pytest.mark.parametrize(("status", "job"), [
    ("booting", JobStatus.QUEUED), ("active", JobStatus.RUNNING),
    # 1.8.3 has no status for a powered-off machine: what Lambda shows after the
    # job's power-off is not in the contract, and never reads as success.
    ("unhealthy", JobStatus.UNKNOWN), ("terminated", JobStatus.UNKNOWN),
])
def test_job_status_is_what_the_machine_says(api, run, provider, status, job):
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        status=status, tags=[{"key": "gpucloud-launch-id", "value": "gj-7f3a9c"}])))
    found = run(provider.get_job(INSTANCE_ID))
    assert found.status is job and found.launch_id == "gj-7f3a9c"
    assert job_of(run(provider.get(INSTANCE_ID))).status is job
