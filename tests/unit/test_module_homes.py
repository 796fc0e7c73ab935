"""The queue's worker and Queue, and the job spec, each hold one concern, with
the parts they use in modules named for theirs; what users import stays
importable where it was (``gpucloud.queue.worker``, ``gpucloud.queue``,
``gpucloud.jobs.spec``, ``gpucloud``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucloud
from gpucloud.jobs import spec, spec_errors
from gpucloud.queue import params, redis_retry, runners, task_logs, task_run
from gpucloud.queue import worker as W

SRC = Path(gpucloud.__file__).parent


def test_the_worker_still_gives_what_a_caller_of_it_uses() -> None:
    for name in W.__all__:
        assert getattr(W, name) is not None, name
    # One object, not a copy: a runner given to run_worker is the runners' own.
    assert W.direct_runner is runners.direct_runner and W.docker_runner is runners.docker_runner
    assert W.Launch is runners.Launch and W.KILL_GRACE == task_run.KILL_GRACE == 10.0
    assert W.run_worker.__module__ == "gpucloud.queue.worker"
    assert task_logs.flush.__module__ != redis_retry.Persist.__module__


def test_the_spec_and_the_queue_names_stay_where_users_import_them() -> None:
    from gpucloud import JobSpec
    from gpucloud.queue import Queue, apply_params

    assert JobSpec is spec.JobSpec
    assert {"load", "loads", "schema", "from_any"} <= set(dir(spec))
    assert apply_params is params.apply_params
    assert Queue.__module__ == "gpucloud.queue.core"


def test_a_spec_error_still_names_the_close_field() -> None:
    with pytest.raises(gpucloud.SpecError) as caught:
        spec.from_any({"name": "a", "image": "i", "resources": {"gpu": "H100", "gpus": 2}})
    assert caught.value.message == ("job: resources.gpus: unknown field, did you mean gpu? "
                                    "(`gpucloud schema job` lists the fields)")
    assert spec_errors.more_problems.__module__ == "gpucloud.jobs.spec_errors"


@pytest.mark.parametrize("package", ["queue", "jobs"])
def test_no_module_of_the_queue_or_the_jobs_mixes_concerns_past_400_lines(package: str) -> None:
    long = {p.name: n for p in (SRC / package).glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
