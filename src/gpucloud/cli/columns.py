"""Fitting a table's columns into a width: which columns stay, how wide each is.

A narrow terminal keeps what a reader acts on whole (the ref they copy, the
price, the status) and gives up the rest in a stated order: free text (names,
region lists) is cut with an ellipsis first, down to a floor; then whole
columns are left out, the least useful first; only then are the remaining
columns other than the kept ones cut, down to their header. A line that still
does not fit is cut at the edge by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

GAP = 2  # spaces between columns
FREE_TEXT_FLOOR = 8  # a cut name still shows this much, so it can be recognised


def layout(widths: Sequence[int], headers: Sequence[str], limit: int,
           shrink: Sequence[int] = (), keep: Sequence[int] = (),
           drop: Sequence[int] = ()) -> tuple[list[int], dict[int, int]]:
    """(the columns shown, in order; the width of each) for natural `widths`."""
    shown = list(range(len(widths)))
    for column in [None, *drop]:
        if column is not None:
            shown.remove(column)
        sized = _shrunk(shown, widths, headers, limit, [shrink], {i: FREE_TEXT_FLOOR
                                                                for i in shrink})
        if _total(sized) <= limit:
            return shown, sized
    # Still too wide with every droppable column gone: cut the rest but `keep`.
    others = [i for i in shown if i not in keep]
    return shown, _shrunk(shown, widths, headers, limit, [shrink, others],
                          {i: FREE_TEXT_FLOOR if i in shrink else 0 for i in shown})


def _shrunk(shown: list[int], widths: Sequence[int], headers: Sequence[str], limit: int,
            stages: Sequence[Sequence[int]], floor: dict[int, int]) -> dict[int, int]:
    """Narrow the widest column of each stage in turn, one character at a time,
    never below its header nor its floor (nor its content, when shorter)."""
    sized = {i: widths[i] for i in shown}
    for stage in stages:
        columns = [i for i in stage if i in sized]
        lowest = {i: max(len(headers[i]), min(floor.get(i, 0), widths[i])) for i in columns}
        while _total(sized) > limit:
            candidates = [i for i in columns if sized[i] > lowest[i]]
            if not candidates:
                break
            sized[max(candidates, key=lambda i: sized[i])] -= 1
    return sized


def _total(sized: dict[int, int]) -> int:
    return sum(sized.values()) + GAP * (len(sized) - 1)


__all__ = ["layout"]
