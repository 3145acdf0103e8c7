import pytest

from autotune.devices import CAPABILITIES, PROFILES, detect, get_profile, resolve_device
from autotune.exceptions import DeviceUnavailableError, UnknownNameError


def test_profiles_cover_the_issue_and_use_known_capabilities():
    assert set(PROFILES) == {"cpu", "v100", "a100", "h100", "h200", "rtx3090", "rtx5000-ada", "mps"}
    for profile in PROFILES.values():
        assert profile.capabilities <= CAPABILITIES, profile.name


def test_capabilities_follow_the_hardware():
    assert not PROFILES["v100"].has("bf16") and PROFILES["v100"].has("fp16_tensor_cores")
    assert not PROFILES["v100"].has("flash_attention") and PROFILES["a100"].has("flash_attention")
    assert PROFILES["h100"].has("tf32") and PROFILES["h100"].has("fast_fp64")
    assert not PROFILES["rtx3090"].has("fast_fp64")
    assert not PROFILES["mps"].has("fp64") and not PROFILES["cpu"].has("cuda")
    assert PROFILES["v100"].has("efficient_attention") and not PROFILES["v100"].has("cudnn_attention")
    assert PROFILES["h100"].has("cudnn_attention")


def test_cpu_attention_capabilities_are_the_sdpa_backends_torch_runs_here():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 8, 4)
    backends = {"flash_attention": SDPBackend.FLASH_ATTENTION, "efficient_attention": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn_attention": SDPBackend.CUDNN_ATTENTION}
    for capability, backend in backends.items():
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, q, q)
            runs = True
        except RuntimeError:
            runs = False
        assert runs == PROFILES["cpu"].has(capability), capability


def test_cpu_is_always_detected_last():
    found = detect()
    assert found[-1].profile.name == "cpu" and found[-1].details["threads"] >= 1
    assert detect(use_torch=False)[-1].profile.name == "cpu"


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="valid: a100, auto, cpu, h100"):
        get_profile("tpu")


def test_missing_device_is_one_line_naming_what_was_found():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; the message is tested where there is none")
    with pytest.raises(DeviceUnavailableError) as info:
        resolve_device("v100")
    message = str(info.value)
    assert "\n" not in message and "found: cpu" in message and "--device auto" in message
