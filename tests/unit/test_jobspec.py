"""The job file: every problem names the file, the line and the field; secrets
are references only; money stays exact."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud import JobSpec
from gpucloud.errors import SpecError, exit_code_for
from gpucloud.jobs.spec import Resources, from_any, load, loads, schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train-job.yaml"

GOOD = """\
name: train
image: pytorch/pytorch:2.4.0
command: [python, train.py]
resources:
  gpu: h100
  gpu_count: 8
max_runtime: 6h
max_cost: 12.5
"""


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        loads(text, "job.yaml")
    assert exit_code_for(caught.value) == 2
    return caught.value


def test_a_good_file_loads_with_canonical_gpu_and_exact_money():
    spec = loads(GOOD)
    assert spec.resources.gpu == "H100" and spec.resources.gpu_count == 8
    assert spec.max_cost == Decimal("12.5") and isinstance(spec.max_cost, Decimal)
    assert spec.max_runtime_seconds == 6 * 3600


def test_unknown_gpu_names_line_field_and_suggestion():
    exc = error_of(GOOD.replace("gpu: h100", "gpu: h1000"))
    assert str(exc).startswith("job.yaml:5: resources.gpu: unknown GPU 'h1000'")
    assert "did you mean H100" in str(exc)


def test_unknown_field_names_its_own_line():
    exc = error_of(GOOD + "retry: 3\n")
    assert str(exc) == ("job.yaml:9: retry: unknown field, did you mean retries? "
                        "(`gpucloud schema job` lists the fields)")


@pytest.mark.parametrize("extra, where, guess", [
    ("imgae: x\n", "imgae", ", did you mean image?"),
    ("max_cots: 3\n", "max_cots", ", did you mean max_cost?"),
    # Each level suggests its own fields: dir is checkpoint's, keyring a secret's.
    ("checkpoint:\n  dri: /ckpt\n", "checkpoint.dri", ", did you mean dir?"),
    ("secrets:\n  HF:\n    env: HF_TOKEN\n    kyring: a/b\n", "secrets.HF.kyring",
     ", did you mean keyring?"),
    ("zzzz: 1\n", "zzzz", ""),
])
def test_unknown_fields_suggest_the_close_ones_of_their_level(extra, where, guess):
    exc = error_of(GOOD + extra)
    assert f" {where}: unknown field{guess} (`gpucloud schema job`" in str(exc)


def test_a_misspelt_resources_field_suggests_from_resources():
    exc = error_of(GOOD.replace("  gpu_count: 8", "  gpu_cout: 8"))
    assert "resources.gpu_cout: unknown field, did you mean gpu_count?" in str(exc)


def test_missing_field_is_named():
    exc = error_of(GOOD.replace("image: pytorch/pytorch:2.4.0\n", ""))
    assert str(exc) == "job.yaml:1: image: required"


def test_yaml_syntax_error_names_the_line():
    exc = error_of("name: a\nimage: x\nresources:\n  gpu: [h100\n  gpu_count: 2\n")
    assert str(exc).startswith("job.yaml:") and "not valid YAML" in str(exc)
    line = int(str(exc).split(":")[1])
    assert 4 <= line <= 6


def test_a_bad_duration_is_named():
    exc = error_of(GOOD.replace("max_runtime: 6h", "max_runtime: 6"))
    assert str(exc).startswith("job.yaml:7: max_runtime: 6 is not a duration")
    exc = error_of(GOOD.replace("max_runtime: 6h", "max_runtime: 6 parsecs"))
    assert str(exc).startswith("job.yaml:7: max_runtime: ") and "e.g." in str(exc)


def test_a_secret_value_in_the_file_is_refused_and_never_echoed():
    exc = error_of(GOOD + "secrets:\n  HF_TOKEN: hf_AbCdEf0123456789\n")
    text = f"{exc} {exc.hint}"
    assert str(exc).startswith("job.yaml:10: secrets.HF_TOKEN:")
    assert "{env: VAR}" in text and "hf_AbCdEf0123456789" not in text
    exc = error_of(GOOD + "secrets:\n  HF_TOKEN: {env: hf_AbCdEf-0123456789}\n")
    assert "hf_AbCdEf-0123456789" not in f"{exc} {exc.hint}"


def test_secret_references_env_or_keyring_exactly_one():
    spec = loads(GOOD + "secrets:\n  A: {env: A_VAR}\n  B: {keyring: svc/user}\n")
    assert spec.secrets["A"].env == "A_VAR" and spec.secrets["B"].keyring == "svc/user"
    exc = error_of(GOOD + "secrets:\n  A: {env: A_VAR, keyring: svc/user}\n")
    assert "exactly one of env or keyring" in str(exc)
    exc = error_of(GOOD + "secrets:\n  A: {keyring: nouser}\n")
    assert "<service>/<user>" in str(exc)


def test_checkpoint_dir_must_be_absolute_and_url_a_storage_url():
    assert loads(GOOD + "checkpoint: {url: s3://b/run}\n").checkpoint.dir == "/checkpoints"
    assert "absolute path" in str(error_of(GOOD + "checkpoint: {dir: ckpt}\n"))
    assert "storage URL" in str(error_of(GOOD + "checkpoint: {url: bucket/run}\n"))


def test_env_cannot_set_checkpoint_dir_or_shadow_a_secret():
    assert "CHECKPOINT_DIR" in str(error_of(GOOD + "env: {CHECKPOINT_DIR: /x}\n"))
    exc = error_of(GOOD + "env: {A: b}\nsecrets: {A: {env: A}}\n")
    assert "both in env and in secrets" in str(exc)


def test_not_a_mapping_and_missing_file():
    assert str(error_of("- a\n- b\n")).startswith("job.yaml:1: a job file is a mapping")
    with pytest.raises(SpecError, match="no job file"):
        load("/nonexistent/job.yaml")


def test_python_construction_and_float_money_refused():
    spec = JobSpec(name="t", image="img", resources=Resources(gpu="a100-80gb"),
                   max_cost=Decimal("3"))
    assert spec.resources.gpu == "A100-80GB"
    with pytest.raises(SpecError, match="max_cost: .*0.1 is not a price"):
        from_any({"name": "t", "image": "i", "resources": {"gpu": "h100"}, "max_cost": 0.1})


def test_the_example_is_valid():
    spec = load(EXAMPLE)
    assert spec.checkpoint is not None and spec.checkpoint.url
    assert spec.retries >= 1 and spec.max_runtime and spec.secrets
    assert any("resume" in a for a in spec.args)


def test_schema_describes_every_field_and_forbids_others():
    out = schema()
    assert out["additionalProperties"] is False
    assert {"name", "image", "resources", "secrets", "checkpoint", "max_runtime"} <= set(
        out["properties"])
    assert set(out["required"]) == {"name", "image", "resources"}
    for definition in out["$defs"].values():
        assert definition["additionalProperties"] is False


def test_python_construction_never_repeats_a_pasted_secret():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        JobSpec(name="t", image="i", resources=Resources(gpu="h100"),
                secrets={"HF_TOKEN": "hf_PastedValue0123456789"})  # type: ignore[dict-item]
    assert "hf_PastedValue0123456789" not in str(caught.value)


@pytest.mark.parametrize("url, ok", [
    ("s3://bucket/run-1", True), ("gs://bucket/run-1", True), ("b2:bucket/run-1", True),
    ("az://container/run-1", False), ("bucket/run-1", False), ("s3://", False),
])
def test_a_checkpoint_url_is_one_the_runner_can_sync_to(url, ok):
    # aws for s3://, gsutil for gs://, rclone for remote:path; anything else
    # would only fail on the machine, after the money is spent.
    spec = dict(name="x", image="y", resources={"gpu": "h100"}, checkpoint={"url": url})
    if ok:
        assert JobSpec(**spec).checkpoint.url == url
    else:
        with pytest.raises(Exception, match="storage URL"):
            JobSpec(**spec)
