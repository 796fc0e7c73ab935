"""The line of a failed task's error that says what failed, on real `docker run`
output (tests/fixtures/docker/SOURCE.txt): `queue status` shows it, and the
worker's error for a task ends with it rather than with docker's usage pointer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import worker as W
from gpucloud.queue.error_line import first_meaningful
from gpucloud.queue.failures import ERROR_CHARS
from tests.unit.test_worker import Claim, FakeQueue

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "docker"
WHAT_FAILED = {
    "run_no_space_left.txt": "docker: failed to register layer: write /opt/unity/Editor/Data/"
                             "PlaybackEngines/WebGLSupport/BuildTools/Emscripten/emscripten/"
                             "cache/sysroot/lib/wasm32-emscripten/pic/libwasmfs-mt-debug.a: "
                             "no space left on device",
    "run_unknown_runtime.txt": "docker: Error response from daemon: Unknown runtime "
                               "specified nvidia.",
    "run_prestart_hook_failed.txt": "docker: Error response from daemon: OCI runtime create "
                                    "failed: container_linux.go:349: starting container",
}


@pytest.mark.parametrize("name", sorted(WHAT_FAILED))
def test_the_first_meaningful_line_of_real_docker_output(name: str) -> None:
    text = (FIXTURES / name).read_text()
    assert first_meaningful(text).startswith(WHAT_FAILED[name])
    # as the worker records it: its reason, then the output (any order of noise)
    assert first_meaningful("\n\n" + text).startswith(WHAT_FAILED[name])


def test_only_noise_falls_back_to_the_first_line_and_nothing_is_empty() -> None:
    assert first_meaningful("exit code 125: Run 'docker run --help' for more information") \
        == "exit code 125: Run 'docker run --help' for more information"
    assert first_meaningful("") == "" and first_meaningful("\n \n") == ""
    assert first_meaningful("Traceback (most recent call last):\n  File \"t.py\"") \
        == 'File "t.py"'


@pytest.mark.parametrize("name", sorted(WHAT_FAILED))
def test_the_worker_error_names_what_failed_not_the_usage_pointer(name: str,
                                                                 tmp_path: Path) -> None:
    # The task prints docker's real output and exits 125, as `docker run` does.
    out = FIXTURES / name
    code = (f"import sys; sys.stderr.write(open({str(out)!r}).read()); sys.exit(125)")
    spec = JobSpec(name="t", image="i", command=[sys.executable, "-c", code],
                   resources={"gpu": "H100"})
    q = FakeQueue([Claim("d", spec, {}, 1)])
    W.run_worker(q, worker_id="w", runner=W.direct_runner, work_dir=tmp_path, idle=0.2)
    [(kind, _, exit_code, error)] = q.ended
    assert (kind, exit_code) == ("fail", 125)
    # the worker keeps the line's first ERROR_CHARS characters
    assert error.startswith("exit code 125: ")
    assert "--help" not in error and "error waiting for container" not in error
    assert error.endswith(first_meaningful(out.read_text())[:ERROR_CHARS])
