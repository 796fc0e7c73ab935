"""RunPod runs a job as a pod of the job's image: the exact
create request (golden file, validated against the v2 OpenAPI fixture), the
wrapper that stops the pod with its pod-scoped key, and job statuses."""

from __future__ import annotations

import subprocess

import pytest

from gpucloud.providers.runpod.adapter import JOB_ARGS
from gpucloud.errors import SpecError
from gpucloud.models import JobStatus
from tests.adapters._job_support import (
    DEADLINE,
    SECRET,
    assert_golden,
    assert_marked_and_keyless,
    make_job,
)
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    KEY,
    POD,
    POD_ID,
    api,
    echo_pod,
    make_spec,
    pod_body,
    provider,
    reply,
    run,
    sent_json,
    sleeps,
)


def test_job_pod_sends_exactly_the_golden_request(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    instance = run(provider.create(make_spec(launch_id="gj-7f3a9c01", name="train-resnet",
                                             shutdown_at=DEADLINE, job=make_job())))
    sent = sent_json(route.calls.last.request)
    assert_golden("runpod", sent, ("env", "GPUCLOUD_JOB"))
    # The job's image, not an image given for plain machines; the wrapper runs
    # from env, args only evaluates it.
    assert sent["image"] == make_job().image and sent["args"] == JOB_ARGS
    assert sent["env"]["HF_TOKEN"] == SECRET and sent["env"]["CHECKPOINT_DIR"] == "/checkpoints"
    script = sent["env"]["GPUCLOUD_JOB"]
    assert 'runpodctl stop pod "$RUNPOD_POD_ID"' in script and SECRET not in script
    assert '"$@" python train.py --epochs 3 --resume >>' in script
    assert_marked_and_keyless(route.calls.last.request, KEY)
    assert instance.launch_id == "gj-7f3a9c01" and instance.shutdown_at == DEADLINE


def test_the_args_string_evaluates_the_wrapper_from_env():
    # What the container's entrypoint receives, split shell-style as RunPod's docs quote it.
    result = subprocess.run(["sh", "-c", f"exec {JOB_ARGS}"], text=True, capture_output=True,
                            env={"GPUCLOUD_JOB": "echo ran; echo $((1 + 1))",
                                 "PATH": "/usr/bin:/bin"},
                            check=False)
    assert result.stdout == "ran\n2\n"


def test_a_job_without_a_command_is_refused_before_any_request(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    with pytest.raises(SpecError, match="give the job a command"):
        run(provider.create(make_spec(job=make_job(command=()))))
    assert route.call_count == 0


@pytest.mark.parametrize(("status", "job"), [
    ("RUNNING", JobStatus.RUNNING),
    # EXITED after the wrapper stopped the pod: the job ended, but whether it
    # succeeded is only on the pod's disk ($GC_STATE/exit-status), never guessed.
    ("EXITED", JobStatus.UNKNOWN),
    ("TERMINATED", JobStatus.UNKNOWN),
])
def test_job_status_from_the_pod(api, run, provider, status, job):
    api.on("GET", POD, reply(200, pod_body(status=status, env={"GPUCLOUD_LAUNCH_ID": "gj-1"})))
    found = run(provider.get_job(POD_ID))
    assert found.status is job and found.provider_status == status
