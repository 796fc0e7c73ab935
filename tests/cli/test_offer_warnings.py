"""What `offers` warns of, in the real CLI with no credentials: a provider
that sells no spot is said to sell none (not "missing from the catalog"), a
spot request on one is a usage error (exit 2) naming those that do, and the
providers the bundled catalog has nothing for are one stderr line that
`--quiet` or `[defaults] quiet_missing = true` silences. `--json` keeps every
warning in the document and prints nothing on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._subprocess import gpucloud
from tests.docs._readme import manual

H100_7 = ("offers", "--gpu", "h100", "--count", "7")  # the catalog: RunPod alone sells 7x H100


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "cli-home"
    path.mkdir()
    return path


def test_spot_names_the_providers_that_sell_none(home):
    result = gpucloud("offers", "--gpu", "h100", "--spot", home=home)
    assert result.returncode == 0, result.stderr
    for name in ("lambda", "runpod", "vastai"):
        assert f"warning: {name} sells no spot machines\n" in result.stderr
    assert "in the bundled catalog" not in result.stderr
    assert result.stdout.split("\n")[1].startswith("verda ")  # Verda prices spot


def test_spot_on_a_provider_that_sells_none_is_a_usage_error(home):
    result = gpucloud("offers", "--gpu", "h100", "--spot", "--provider", "lambda", home=home)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: lambda sells no spot machines",
        "hint: drop --spot for an on-demand machine, or pick a provider that "
        "sells spot: verda"]
    assert result.stdout == ""
    # The manual (docs/machines.md) shows this very error under the offers example.
    readme = manual()
    assert "\n    gpucloud offers --gpu h100 --spot --provider lambda    # exit 2\n" + "".join(
        f"    {line}\n" for line in result.stderr.splitlines()) in readme


def test_spot_is_refused_the_same_with_the_providers_credentials(home):
    # Refused before any request: the fake key is never sent anywhere.
    result = gpucloud("offers", "--gpu", "h100", "--spot", "--provider", "runpod", home=home,
                      GPUCLOUD_RUNPOD_API_KEY="not-a-real-key")
    assert result.returncode == 2
    assert "runpod sells no spot machines" in result.stderr
    assert "not-a-real-key" not in result.stderr


def test_spot_warnings_stay_in_the_json_document(home):
    result = gpucloud("offers", "--gpu", "h100", "--spot", "--json", home=home)
    assert result.returncode == 0 and result.stderr == ""
    warnings = json.loads(result.stdout)["warnings"]
    assert sorted(warnings) == ["fluidstack sells no spot machines",
                                "hyperstack sells no spot machines",
                                "lambda sells no spot machines", "runpod sells no spot machines",
                                "shadeform sells no spot machines",
                                "vastai sells no spot machines"]


def test_providers_missing_from_the_catalog_are_said_once(home):
    result = gpucloud(*H100_7, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: no 7x H100 in the bundled catalog of fluidstack, hyperstack, lambda, shadeform, "
        "vastai, verda; add credentials "
        "for live offers (--quiet or [defaults] quiet_missing = true hides this)"]


def test_quiet_silences_them(home):
    result = gpucloud(*H100_7, "--quiet", home=home)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.split("\n")[1].startswith("runpod ")


def test_quiet_missing_in_config_silences_them(home):
    (home / "gpucloud").mkdir()
    (home / "gpucloud" / "config.toml").write_text("[defaults]\nquiet_missing = true\n")
    result = gpucloud(*H100_7, home=home)
    assert result.returncode == 0 and result.stderr == ""
    estimate = gpucloud("estimate", "--gpu", "h100", "--count", "7", home=home)
    assert estimate.returncode == 0 and estimate.stderr == ""


def test_quiet_missing_must_be_a_boolean(home):
    (home / "gpucloud").mkdir()
    (home / "gpucloud" / "config.toml").write_text('[defaults]\nquiet_missing = "yes"\n')
    result = gpucloud(*H100_7, home=home)
    assert result.returncode == 3
    assert "defaults.quiet_missing must be true or false" in result.stderr


def test_json_keeps_one_warning_per_missing_provider(home):
    result = gpucloud(*H100_7, "--json", "--quiet", home=home)
    assert result.returncode == 0 and result.stderr == ""
    assert json.loads(result.stdout)["warnings"] == [
        f"{name}: no 7x H100 in the bundled catalog; add credentials for live offers"
        for name in ("fluidstack", "hyperstack", "lambda", "shadeform", "vastai", "verda")]
