"""Vast.ai runs a job as an instance of the job's image: the
exact create request (golden file, validated against the OpenAPI fixture), an
onstart that keeps the self-guard and starts the job's runner within 4048
characters, and job statuses."""

from __future__ import annotations

import base64
import gzip
import random
import re
import subprocess

import pytest

from gpucloud.providers._jobscript import compressed
from gpucloud.providers.vastai._guard import ONSTART_MAX, guard_script
from gpucloud.providers.vastai._job import RUNNER_PATH, job_onstart
from gpucloud.errors import SpecError, exit_code_for
from gpucloud.models import JobStatus, VolumeMount
from tests.adapters._job_support import (
    DEADLINE,
    SECRET,
    assert_golden,
    assert_marked_and_keyless,
    make_job,
)
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    ASK,
    KEY,
    NEW,
    api_fixture,
    create_routes,
    make_spec,
    provider_fixture,
    reply,
    run_fixture,
    sent,
    show,
    sleeps_fixture,
)


def unpacked(onstart: str) -> str:
    match = re.fullmatch(r"echo (\S+) \| base64 -d \| gunzip \| sh\n", onstart)
    return gzip.decompress(base64.b64decode(match.group(1))).decode() if match else onstart


def test_job_instance_sends_exactly_the_golden_request(api, run, provider):
    put, _ = create_routes(api)
    run(provider.create(make_spec(launch_id="gj-7f3a9c", name="train-resnet",
                                  shutdown_at=DEADLINE, job=make_job())))
    body = sent(put)
    # The golden file holds the onstart unpacked (readable); the exact wire form
    # is that script gzip+base64, since it is over 4048 characters plain.
    script = unpacked(body["onstart"])
    assert body["onstart"] == compressed(script) and len(script) > ONSTART_MAX
    assert_golden("vastai", {**body, "onstart": script}, ("onstart",))
    assert body["image"] == make_job().image and body["runtype"] == "ssh_direc ssh_proxy"
    assert body["env"]["HF_TOKEN"] == SECRET and body["env"]["CHECKPOINT_DIR"] == "/checkpoints"
    assert len(body["onstart"]) <= ONSTART_MAX
    # The guard first (backgrounded), then the runner, started in the background too.
    assert script.startswith(guard_script())
    assert f"nohup sh {RUNNER_PATH} >/dev/null 2>&1 &" in script
    assert "/api/v0/instances/$CONTAINER_ID/" in script and SECRET not in script
    assert_marked_and_keyless(put.calls.last.request, KEY)


def test_a_long_command_travels_compressed_and_still_runs_as_shell():
    script = job_onstart(make_job(args=tuple(f"--option-{i}=value-{i}" for i in range(60))))
    assert len(script) <= ONSTART_MAX and script.startswith("echo ")
    inner = unpacked(script)
    assert "--option-59=value-59" in inner
    assert subprocess.run(["sh", "-n"], input=inner, text=True, check=False).returncode == 0


def test_a_command_that_cannot_fit_is_refused(api, run, provider):
    put, _ = create_routes(api)
    noise = base64.b64encode(random.Random(8).randbytes(4000)).decode()  # does not compress
    with pytest.raises(SpecError, match="onstart"):
        run(provider.create(make_spec(job=make_job(args=(noise,)))))
    assert put.call_count == 0


def test_a_heredoc_marker_in_the_command_cannot_end_the_script_early():
    script = unpacked(job_onstart(make_job(args=("a\nGPUCLOUD_JOB\nb",))))
    assert "<<'GPUCLOUD_JOB_'" in script
    assert subprocess.run(["sh", "-n"], input=script, text=True, check=False).returncode == 0


@pytest.mark.parametrize(("actual", "job"), [
    ("running", JobStatus.RUNNING), ("loading", JobStatus.QUEUED),
    # A container that exited says nothing of the job's own exit status.
    ("exited", JobStatus.UNKNOWN),
])
def test_job_status_from_the_instance(api, run, provider, actual, job):
    api.on("GET", f"/api/v0/instances/{NEW}/", reply(200, show(
        NEW, actual_status=actual, intended_status="running", label="gpucloud:gj-1 train")))
    found = run(provider.get_job(NEW))
    assert found.status is job and found.launch_id == "gj-1"


def test_a_job_with_volumes_is_refused_before_any_request(api, run, provider):
    # Vast's volumes live on one host machine: nothing a job on any offer could mount
    # (gpucloud lists and deletes them, test_vastai_volumes.py).
    put, _ = create_routes(api)
    job = make_job(volumes=(VolumeMount(name="data", mount="/data", volume_id="42"),))
    with pytest.raises(SpecError, match="vastai has no network volumes") as caught:
        run(provider.create(make_spec(job=job)))
    assert exit_code_for(caught.value) == 2
    assert put.call_count == 0
    assert provider.volume_refusal() is not None
