"""The manual's exit-code table (docs/errors.md) is the contract: check it against the mapping."""

import re

import pytest

import gpucloud
from gpucloud import errors
from gpucloud.errors import EXIT_CODES, exit_code_for
from tests.docs._readme import manual



def documented():
    rows = {}
    in_table = False
    for line in manual().splitlines():
        if line.startswith("| exit code |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        match = re.match(r"\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if in_table and match:
            rows[int(match.group(1))] = re.findall(r"`(\w+)`", match.group(2))
    return rows


def test_readme_table_matches_the_mapping():
    table = documented()
    assert set(table) == {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 130}
    checked = 0
    for code, names in table.items():
        for name in names:
            cls = KeyboardInterrupt if name == "KeyboardInterrupt" else getattr(errors, name)
            assert exit_code_for(cls.__new__(cls)) == code, name
            checked += 1
    assert checked >= 20


def test_every_error_class_is_documented():
    named = {n for names in documented().values() for n in names}
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.GpuCloudError):
            assert name in named or name == "GpuCloudError", f"{name} missing from the manual"


def test_unexpected_exceptions_are_bugs():
    assert exit_code_for(ValueError("boom")) == 1
    assert EXIT_CODES[errors.ConfirmationRequired] == 8


@pytest.mark.parametrize("name", gpucloud.__all__)
def test_public_names_resolve(name):
    assert getattr(gpucloud, name) is not None
