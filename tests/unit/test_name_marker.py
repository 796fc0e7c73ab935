"""A moved deadline kept in a machine's name (providers/_name_marker.py): the
user's part and the latest marker that parses; a name without the marker is
handed back as it is, without scanning it for one."""

from __future__ import annotations

from datetime import datetime, timezone

from gpucloud.providers import _name_marker
from gpucloud.providers._name_marker import mark_name, split_name


def test_the_user_part_and_the_latest_valid_marker():
    early = datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)
    late = datetime(2026, 12, 2, 6, 30, tzinfo=timezone.utc)
    name = f"{mark_name('train', early)} gc-until:garbage gc-until:20261202T063000Z"
    assert split_name(name) == ("train", late)
    assert split_name(mark_name(None, early)) == (None, early)
    assert split_name("") == (None, None) and split_name(None) == (None, None)
    # Glued to another word, the marker is not one: the name is the user's.
    assert split_name("xgc-until:20261201T180000Z") == ("xgc-until:20261201T180000Z", None)


def test_a_name_without_the_marker_is_not_scanned_for_one(monkeypatch):
    scans: list[str] = []

    class Counting:
        def __init__(self, pattern):
            self.pattern = pattern

        def finditer(self, text):
            scans.append(text)
            return self.pattern.finditer(text)

        def sub(self, repl, text):
            return self.pattern.sub(repl, text)

    monkeypatch.setattr(_name_marker, "_TOKEN", Counting(_name_marker._TOKEN))
    names = [f"bench-{n}" for n in range(100)]  # a listing's names: none moved
    assert [split_name(n) for n in names] == [(n, None) for n in names]
    assert scans == []
    marked = mark_name("bench-0", datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc))
    assert split_name(marked)[0] == "bench-0" and scans == [marked]
