import pytest

from gpucloud.errors import UnknownGPUError
from gpucloud.catalog.gpus import GPUS, gpu_info, normalize_gpu, parse_gpu


@pytest.mark.parametrize("name", [
    "h100", "H100", "H100 80GB", "H100 (80 GB SXM5)", "NVIDIA H100 80GB HBM3",
    "h100-sxm", "H100 PCIe", "  h100  ",
])
def test_h100_aliases(name):
    assert parse_gpu(name) == "H100"


@pytest.mark.parametrize("name, expected", [
    ("a100", "A100-40GB"),
    ("A100 (40 GB SXM4)", "A100-40GB"),
    ("A100 (80 GB SXM4)", "A100-80GB"),
    ("a100-80gb", "A100-80GB"),
    ("NVIDIA A100 80GB PCIe", "A100-80GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("A100 40GB", "A100-40GB"),
])
def test_a100_memory_variants_are_told_apart(name, expected):
    assert parse_gpu(name) == expected


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA GeForce RTX 4090", "RTX4090"), ("rtx 4090", "RTX4090"), ("L40S", "L40S"),
    ("l40", "L40"), ("RTX A6000", "RTX-A6000"), ("RTX 6000 Ada", "RTX6000-ADA"),
    ("B200 (180 GB SXM6)", "B200"), ("GH200 (96 GB)", "GH200"), ("MI300X", "MI300X"),
])
def test_other_provider_spellings(name, expected):
    assert parse_gpu(name) == expected


def test_unknown_name_suggests_closest():
    with pytest.raises(UnknownGPUError) as info:
        parse_gpu("h1000")
    assert "H100" in info.value.suggestions
    assert "did you mean" in info.value.hint


@pytest.mark.parametrize("name", ["", "   ", "quantum-9000"])
def test_garbage_is_an_error_not_a_crash(name):
    with pytest.raises(UnknownGPUError):
        parse_gpu(name)


def test_provider_names_never_crash():
    assert normalize_gpu("Voodoo5 6000 (64 MB)") == "Voodoo5 6000 (64 MB)"
    assert normalize_gpu("H100 (80 GB SXM5)") == "H100"


def test_every_canonical_name_round_trips():
    for gpu in GPUS:
        assert parse_gpu(gpu.name) == gpu.name
        assert parse_gpu(gpu.name.lower()) == gpu.name
        assert gpu_info(gpu.name) is gpu


@pytest.mark.parametrize("name, expected, memory", [
    ("NVIDIA RTX 2000 Ada Generation", "RTX2000-ADA", 16),  # RunPod's GpuType id
    ("RTX2000-Ada", "RTX2000-ADA", 16),  # SkyPilot's RunPod catalog
    ("rtx 2000 ada", "RTX2000-ADA", 16),
    ("RTXPRO4000", "RTX-PRO-4000", 24),
    ("NVIDIA RTX PRO 4000 Blackwell", "RTX-PRO-4000", 24),
    ("RTXPRO4500", "RTX-PRO-4500", 32),
    ("RTXPRO4500-SE", "RTX-PRO-4500", 32),
    ("RTX PRO 4500 Blackwell", "RTX-PRO-4500", 32),
    ("RTXPRO5000", "RTX-PRO-5000", 48),
    ("rtx pro 5000 blackwell", "RTX-PRO-5000", 48),
])
def test_rtx_2000_ada_and_rtx_pro_blackwell_cards(name, expected, memory):
    assert parse_gpu(name) == normalize_gpu(name) == expected
    assert gpu_info(expected).memory_gb == memory
