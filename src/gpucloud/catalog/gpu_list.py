"""What `nvidia-smi -L` says a machine holds: one "GPU i: NAME (UUID: ...)"
line per GPU, as NVIDIA's nvidia-smi documentation shows it.

Below both users of it: `gpucloud doctor` (machine/) checks a machine
against what was paid for, and the ssh provider (providers/ssh/) checks an
owned host against what config.toml says it holds before allocating it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LIST_COMMAND = "nvidia-smi -L"


@dataclass(frozen=True)
class ListedGPU:
    index: int
    name: str  # as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    uuid: str | None


_LISTED = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")


def parse_list(text: str) -> list[ListedGPU]:
    """`nvidia-smi -L`: one "GPU i: NAME (UUID: ...)" line per GPU (MIG lines skipped)."""
    out = []
    for line in text.splitlines():
        match = _LISTED.match(line.strip())
        if match:
            out.append(ListedGPU(int(match.group(1)), match.group(2), match.group(3)))
    return out


__all__ = ["LIST_COMMAND", "ListedGPU", "parse_list"]
