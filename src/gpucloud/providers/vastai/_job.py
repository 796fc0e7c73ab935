"""A job's ``onstart`` on Vast.ai: the self-guard (_guard.py) and the job's
runner (_jobscript.py), which destroys the instance with the per-instance key
Vast injects once the job ended or max_runtime passed.

The runner is written to a file and started in the background: ``onstart``
runs after Vast's entrypoint, so the container (and its sshd) lives on while
the job runs. The whole script must fit in 4048 characters; when it does
not, it travels gzip+base64, as the spec advises.
"""

from __future__ import annotations

from gpucloud.errors import SpecError
from gpucloud.models import JobRun
from gpucloud.providers._jobscript import VAST_DESTROY, compressed, container_script
from gpucloud.providers.vastai._guard import ONSTART_MAX, onstart

RUNNER_PATH = "/var/tmp/gpucloud-job.sh"


def job_onstart(job: JobRun) -> str:
    runner = container_script(job, VAST_DESTROY, "vastai")
    marker = "GPUCLOUD_JOB"
    while marker in runner.splitlines():  # a job argument that would end the heredoc early
        marker += "_"
    start = (f"cat > {RUNNER_PATH} <<'{marker}'\n{runner}{marker}\n"
             f"nohup sh {RUNNER_PATH} >/dev/null 2>&1 &\n")
    script = onstart(start)
    if len(script) > ONSTART_MAX:
        script = compressed(script)
    if len(script) > ONSTART_MAX:
        raise SpecError(f"job {job.name!r}: its command and env do not fit in Vast's onstart "
                        f"({len(script)} of {ONSTART_MAX} characters, compressed)",
                        hint="move long arguments into a file in the image")
    return script


__all__ = ["RUNNER_PATH", "job_onstart"]
