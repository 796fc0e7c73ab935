"""The GPU catalogue: the only place a GPU name is a string.

``parse_gpu`` turns what a user types ("h100", "H100 80GB") into a canonical
name and raises UnknownGPUError with suggestions for anything else.
``normalize_gpu`` does the same for what a provider reports
("NVIDIA H100 80GB HBM3", "H100 (80 GB SXM5)") but keeps an unknown name raw
instead of failing, so a new card in a provider's list never crashes us.

A100 comes in 40 GB and 80 GB; the two are different products at different
prices. A name that gives the memory picks the variant; a bare "a100" means
the original A100 40 GB (NVIDIA's own naming, and the usual catalog
convention). Ask for "a100-80gb" to get the larger card.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field

from gpucloud.errors import UnknownGPUError


@dataclass(frozen=True)
class GPU:
    name: str  # canonical, e.g. "H100"
    vendor: str
    memory_gb: int
    aliases: tuple[str, ...] = field(default=())


# Aliases are written as model keys: lower case, no spaces or punctuation.
GPUS: tuple[GPU, ...] = (
    GPU("B300", "nvidia", 288),
    GPU("B200", "nvidia", 180),
    GPU("GB200", "nvidia", 186),
    GPU("H200", "nvidia", 141),
    GPU("H100", "nvidia", 80, ("h100sxm", "h100pcie", "h100nvl", "h100nvlink", "h100mega")),
    GPU("GH200", "nvidia", 96),
    GPU("H800", "nvidia", 80),
    GPU("A100-80GB", "nvidia", 80, ("a10080gb", "a10080gbsxm", "a10080g", "a100sxm480gb")),
    GPU("A100-40GB", "nvidia", 40, ("a100", "a10040gb", "a10040g", "a100sxm440gb")),
    GPU("A800", "nvidia", 80),
    GPU("A40", "nvidia", 48),
    GPU("A30", "nvidia", 24),
    GPU("A10", "nvidia", 24),
    GPU("A10G", "nvidia", 24),
    GPU("L40S", "nvidia", 48),
    GPU("L40", "nvidia", 48),
    GPU("L4", "nvidia", 24),
    GPU("T4", "nvidia", 16),
    GPU("V100", "nvidia", 16, ("v10016gb",)),
    GPU("V100-32GB", "nvidia", 32, ("v10032gb",)),
    GPU("RTX-PRO-6000", "nvidia", 96, ("rtxpro6000", "rtxpro6000s", "rtxpro6000ws",
                                       "rtxpro6000blackwell", "rtxpro6000se",
                                       "rtxpro6000blackwellserveredition")),
    # RTX PRO Blackwell: 24, 32 and 48 GB GDDR7 (NVIDIA datasheets; the 4500
    # Server Edition has the 4500's 32 GB). A 72 GB 5000 exists: not seen in any
    # catalog yet, so a bare "rtx pro 5000" is the 48 GB card.
    GPU("RTX-PRO-5000", "nvidia", 48, ("rtxpro5000", "rtxpro5000blackwell")),
    GPU("RTX-PRO-4500", "nvidia", 32, ("rtxpro4500", "rtxpro4500blackwell", "rtxpro4500se",
                                       "rtxpro4500blackwellse")),
    GPU("RTX-PRO-4000", "nvidia", 24, ("rtxpro4000", "rtxpro4000blackwell", "rtxpro4000sff")),
    GPU("RTX6000-ADA", "nvidia", 48, ("rtx6000ada", "rtx6000adageneration", "6000ada")),
    GPU("RTX6000", "nvidia", 24, ("quadrortx6000",)),
    GPU("RTX-A6000", "nvidia", 48, ("rtxa6000", "a6000")),
    GPU("RTX-A5000", "nvidia", 24, ("rtxa5000", "a5000")),
    GPU("RTX-A4500", "nvidia", 20, ("rtxa4500", "a4500")),
    GPU("RTX-A4000", "nvidia", 16, ("rtxa4000", "a4000")),
    GPU("RTX4000-ADA", "nvidia", 20, ("rtx4000ada", "rtx4000adageneration")),
    GPU("RTX2000-ADA", "nvidia", 16, ("rtx2000ada", "rtx2000adageneration")),
    GPU("RTX5090", "nvidia", 32),
    GPU("RTX4090", "nvidia", 24),
    GPU("RTX4080", "nvidia", 16, ("rtx4080super", "rtx4080s")),
    GPU("RTX3090", "nvidia", 24, ("rtx3090ti",)),
    GPU("RTX3080", "nvidia", 10, ("rtx3080ti",)),
    GPU("RTX3070", "nvidia", 8, ("rtx3070ti",)),
    GPU("RTX3060", "nvidia", 12, ("rtx3060ti",)),
    GPU("RTX4070", "nvidia", 12, ("rtx4070ti", "rtx4070s", "rtx4070super", "rtx4070sti",
                                  "rtx4070tisuper")),
    GPU("RTX4060", "nvidia", 8, ("rtx4060ti",)),
    GPU("RTX-A2000", "nvidia", 6, ("rtxa2000", "a2000")),
    GPU("MI300X", "amd", 192, ("instinctmi300x",)),
    GPU("MI325X", "amd", 256),
    GPU("MI250", "amd", 128),
)

# Words that say nothing about which GPU it is.
_NOISE = {
    "nvidia", "amd", "geforce", "tesla", "quadro", "radeon", "instinct",
    "sxm", "sxm2", "sxm4", "sxm5", "sxm6", "pcie", "hbm3", "hbm3e", "hbm2e",
    "hbm2", "gdr", "gpu", "gpus", "oam", "x",
}
_MEMORY = re.compile(r"^(\d+)(gb|g|gib)$")
_BY_NAME = {g.name: g for g in GPUS}


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


_BY_KEY: dict[str, GPU] = {}
for _g in GPUS:
    _BY_KEY[_key(_g.name)] = _g
    for _alias in _g.aliases:
        _BY_KEY[_alias] = _g


def _split(raw: str) -> tuple[str, int | None]:
    """Model key and memory (GB) from a free-form GPU description."""
    text = raw.lower().replace("(", " ").replace(")", " ").replace(",", " ")
    # "80 GB" -> "80gb" so memory is one token.
    text = re.sub(r"(\d+)\s*(gb|gib)\b", r"\1gb", text)
    # nvidia-smi joins words with hyphens: "A100-SXM4-80GB", "A100-PCIE-40GB".
    tokens = [t for t in re.split(r"[\s_/-]+", text) if t]
    memory = None
    model: list[str] = []
    for token in tokens:
        cleaned = _key(token)
        match = _MEMORY.match(cleaned)
        if match:
            memory = int(match.group(1))
        elif cleaned and cleaned not in _NOISE and not re.fullmatch(r"\d+x", cleaned):
            model.append(cleaned)
    return "".join(model), memory


@functools.lru_cache(maxsize=1024)  # a listing names the same few GPUs on every row
def _lookup(raw: str) -> GPU | None:
    if raw in _BY_NAME:
        return _BY_NAME[raw]
    whole = _key(raw)
    if whole in _BY_KEY:
        return _BY_KEY[whole]
    model, memory = _split(raw)
    if memory is not None and f"{model}{memory}gb" in _BY_KEY:
        return _BY_KEY[f"{model}{memory}gb"]
    gpu = _BY_KEY.get(model)
    if gpu is None:
        # "h100sxm5" and the like: strip a trailing form-factor word.
        stripped = re.sub(r"(sxm\d?|pcie|nvl|nvlink|hbm3e?)$", "", model)
        gpu = _BY_KEY.get(stripped)
    return gpu


def parse_gpu(name: str) -> str:
    """Canonical name for what a user typed, or UnknownGPUError with suggestions."""
    gpu = _lookup(name.strip()) if name and name.strip() else None
    if gpu is None:
        raise UnknownGPUError(name, suggest(name))
    return gpu.name


def normalize_gpu(raw: str) -> str:
    """Canonical name for what a provider reports; the raw string when unknown."""
    gpu = _lookup(raw.strip()) if raw and raw.strip() else None
    return gpu.name if gpu else raw.strip()


def reported_matches(paid: str, reported: str) -> bool | None:
    """Whether the GPU a machine reports (nvidia-smi's name, e.g. "NVIDIA
    A100-SXM4-80GB") is the model paid for (a canonical name, or a provider's
    raw one). None when the reported name is not in the catalogue, so nothing
    can be said. A paid name without memory ("A100") accepts any memory
    variant of its model; a canonical one with memory ("A100-40GB") does not."""
    seen = _lookup(reported.strip()) if reported.strip() else None
    if seen is None:
        return None
    wanted = _lookup(paid.strip()) if paid.strip() else None
    if wanted is None:
        return False
    if wanted is seen:
        return True
    if _MEMORY_IN_NAME.search(paid) or _split(paid)[1] is not None:
        return False
    return _family(wanted.name) == _family(seen.name)


_MEMORY_IN_NAME = re.compile(r"\d+\s*(gb|g|gib)\b", re.IGNORECASE)


def _family(canonical: str) -> str:
    return re.sub(r"-\d+GB$", "", canonical)


def suggest(name: str, limit: int = 3) -> list[str]:
    """Closest canonical names, for "did you mean" hints."""
    key = _key(name)
    keys = difflib.get_close_matches(key, list(_BY_KEY), n=limit * 3, cutoff=0.5)
    out: list[str] = []
    for k in keys:
        canonical = _BY_KEY[k].name
        if canonical not in out:
            out.append(canonical)
    return out[:limit]


# Dense (no sparsity) BF16 tensor-core peak per GPU, in TFLOPS, as the makers'
# datasheets print it (they headline the 2:4-sparsity figure, twice these,
# marked with an asterisk). NVIDIA H100 / H200 / GH200 / A100 / L40S / L40 /
# L4 / A10 / A40 / A30 datasheets, the HGX B200 datasheet (36 PF sparse for 8
# GPUs), the Ada architecture whitepaper (RTX 4090, FP32 accumulate) and AMD's
# Instinct MI300X datasheet. H800 and A800 are the export variants of H100 SXM
# and A100, with the same tensor cores. What `gpucloud doctor` compares its
# matmul burn with; a GPU not listed gets no ratio.
DENSE_BF16_TFLOPS: dict[str, float] = {
    "B200": 2250.0, "H200": 989.0, "H100": 989.0, "GH200": 989.0, "H800": 989.0,
    "A100-80GB": 312.0, "A100-40GB": 312.0, "A800": 312.0, "L40S": 362.0, "L40": 181.0,
    "L4": 121.0, "A10": 125.0, "A40": 149.7, "A30": 165.0, "RTX4090": 165.2,
    "MI300X": 1307.4,
}
# Form factors sold under one name with lower clocks and power: the word in the
# name the GPU reports picks them (H100 PCIe 756, H100 NVL 835, H200 NVL 835).
_FORM_FACTOR_TFLOPS: dict[tuple[str, str], float] = {
    ("H100", "pcie"): 756.0, ("H100", "nvl"): 835.0, ("H200", "nvl"): 835.0,
}


def datasheet_tflops(name: str, reported: str | None = None) -> float | None:
    """Dense BF16 peak of a canonical GPU name; `reported` (e.g. nvidia-smi's
    "NVIDIA H100 PCIe") picks the form factor. None when not known."""
    words = set(re.split(r"[^a-z0-9]+", (reported or "").lower()))
    for (gpu, word), tflops in _FORM_FACTOR_TFLOPS.items():
        if gpu == name and word in words:
            return tflops
    return DENSE_BF16_TFLOPS.get(name)


def gpu_info(name: str) -> GPU | None:
    """The catalogue entry of a canonical name (None for raw provider names)."""
    return _BY_NAME.get(name)

