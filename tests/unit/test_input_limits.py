"""Limits on the files gpucloud reads: job files, kubeconfigs and config.toml are
refused past their size, nesting and (YAML) alias-expansion limits with an
error naming the limit, never a RecursionError, a hang or a full read of a
huge file. The bombs are built here: a few hundred bytes each."""

from __future__ import annotations

import time

import pytest
import yaml

from gpucloud.config import safe_yaml
from gpucloud.providers.kubernetes import _kubeconfig
from gpucloud.config.settings import load_config
from gpucloud.errors import ConfigurationError, SpecError, exit_code_for
from gpucloud.jobs.spec import loads
from tests.adapters._kubernetes_support import kubeconfig
from tests.cli.test_hostile_files_cli import JOB

GOOD = JOB + "command: [python, train.py]\n"


def anchors(levels: int, width: int) -> str:
    """Top-level keys a0..a{levels-1}: each a list of ``width`` aliases of the one before."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * width)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_expansion_is_counted_without_walking_it():
    # 9**30 values: walking them would never end; counting them is instant.
    node = yaml.compose(anchors(30, 9), Loader=safe_yaml.SafeLoader)
    started = time.monotonic()
    with pytest.raises(safe_yaml.YamlLimitError, match="100,000 values"):
        safe_yaml.check_expansion(node)
    assert time.monotonic() - started < 1


def test_reasonable_aliases_still_load():
    text = GOOD + "env: &shared {A: '1', B: '2'}\nargs: [*shared]\n"
    # Within the limits the alias loads, and fails validation: an alias names the
    # line where its anchored value is written (a composed alias is that node).
    with pytest.raises(SpecError, match=r"^job.yaml:5: args.0: "):
        loads(text, "job.yaml")
    node, data = safe_yaml.compose_and_load(anchors(4, 9))  # 9**4 = 6561 values: fine
    assert len(data["a3"]) == 9 and node is not None


def test_values_written_out_count_too_and_stop_the_composing_early():
    text = GOOD + "args: [" + ", ".join(["a"] * 150_000) + "]\n"  # 450 kB, under 1 MiB
    started = time.monotonic()
    with pytest.raises(SpecError, match="more than 100,000 values"):
        loads(text, "job.yaml")
    assert time.monotonic() - started < 30  # PyYAML composes ~100k nodes a second or two


def test_an_alias_holding_itself_is_refused_not_a_recursion_error():
    with pytest.raises(SpecError) as caught:
        loads(GOOD + "args: &loop [*loop]\n", "job.yaml")
    assert "a cycle" in str(caught.value) and exit_code_for(caught.value) == 2


def test_depth_through_aliases_is_bounded_too():
    # Each anchor nests the previous one a level deeper: 100 short lines, 100 levels.
    lines = ["l0: &l0 [x]"] + [f"l{n}: &l{n} [*l{n - 1}]" for n in range(1, 100)]
    with pytest.raises(safe_yaml.YamlLimitError, match="deeper than 64 levels"):
        safe_yaml.load("\n".join(lines))


def test_line_of_follows_one_path():
    from gpucloud.jobs.yaml_lines import Loader, line_of

    node = yaml.compose(GOOD + "env: {A: '1'}\nargs:\n  - a\n  - b\n", Loader=Loader)
    assert line_of(node, ("args", 1)) == 8
    assert line_of(node, ("env", "A")) == 5
    assert line_of(node, ("resources", "gpu", "deeper")) == 3
    assert line_of(node, ("missing",)) == 1
    assert line_of(None, ("name",)) == 1


# -- kubeconfig ----------------------------------------------------------------------------------

def test_a_kubeconfig_alias_bomb_is_refused(tmp_path):
    path = kubeconfig(tmp_path)
    path.write_text(path.read_text() + anchors(9, 9))
    with pytest.raises(ConfigurationError, match="kubeconfig .* is refused: more than 100,000"):
        _kubeconfig.load(str(path))


def test_a_kubeconfig_nested_100000_deep_is_a_configuration_error(tmp_path):
    path = kubeconfig(tmp_path)
    path.write_text(path.read_text() + "extensions: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigurationError, match="nested deeper than 64 levels"):
        _kubeconfig.load(str(path))


def test_a_kubeconfig_over_4_mib_is_refused_with_the_limit_named(tmp_path):
    path = kubeconfig(tmp_path)
    path.write_text(path.read_text() + "# padding\n" * 500_000)  # valid YAML, 5 MB
    with pytest.raises(ConfigurationError, match="larger than 4 MiB") as caught:
        _kubeconfig.load(str(path))
    assert exit_code_for(caught.value) == 3


# -- config.toml ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "x = " + "[" * 100_000 + "]" * 100_000 + "\n",            # tomllib recurses per array
    "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n",  # and per inline table
    "[" + ".".join(["t"] * 100_000) + "]\nx = 1\n",            # a dotted table: no recursion
])
def test_a_config_toml_nested_too_deep_is_a_configuration_error(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match="nested deeper than 32 levels"):
        load_config(path)


def test_a_config_toml_over_1_mib_is_refused_with_the_limit_named(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[defaults]\nauto_shutdown = "8h"\n' + "# padding\n" * 120_000)
    with pytest.raises(ConfigurationError, match="larger than 1 MiB"):
        load_config(path)
    path.write_text('[defaults]\nauto_shutdown = "8h"\n[sandbox]\ncapacity = 4\n')
    assert load_config(path).auto_shutdown == "8h"  # a normal file is untouched
