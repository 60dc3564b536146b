"""When nvidia-smi fails: why, from its exit status and what it printed (pure; re-exported by
leases.telemetry.nvsmi, where its callers find it)."""

from __future__ import annotations

from leases.core.models import NodeHealth
from leases.telemetry.words import reason

# Messages as nodes print them (issues corpus):
# - "/bin/sh: nvidia-smi: command not found" (openmmtools#693); dash says
#   "sh: 1: nvidia-smi: not found"; exit 127.
# - "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make
#   sure that the latest NVIDIA driver is installed and running." (nvidia-docker#988;
#   qixuema/envs#4 shows it with a typographic apostrophe), exit 9.
# - "Failed to initialize NVML: Driver/library version mismatch" then
#   "NVML library version: 535.161", exit 18 (gputil#55, mozilla/translations#1167).
# - "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot
#   the system to recover this GPU" (OWOD#81), exit 15 (NVML_ERROR_GPU_IS_LOST = 15);
#   also "...GPU0000:0B:00.0: Unknown Error" (open-gpu-kernel-modules#387).
# - "No devices were found" (singuconda#6) and "Failed to initialize NVML: No supported
#   GPUs were found" exit 255 (dra-driver-nvidia-gpu#1008): the GPUs are gone from a
#   node we rent for its GPUs, so they count as lost.
# - "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that
#   the NVIDIA Display Driver is properly installed and present in your system." then
#   "Please also try adding directory that contains libnvidia-ml.so to your system PATH."
#   (nvidia-docker#107 on 367.27, #1163 on 440.44, gpu-manager#101 on 450.66,
#   FasterLivePortrait#8 in 2024, dakota#373 in 2026); nvidia-smi's exit status 12 is
#   "NVML shared library couldn't be found or loaded".
# - "Failed to initialize NVML: Insufficient Permissions" (nvidia-docker#676, #284;
#   nvidia-container-toolkit#33 on 515.65, #210 on podman, #268 on 470.103); exit 4
#   ("the current user does not have permission to access this device"). Not the same as
#   "NVML: Unable to get ... for link 0: Insufficient Permissions" (pynvml#19), one
#   query refused while nvidia-smi itself runs: that one is not the node's health.


def _normalised(text: str) -> str:
    return text.replace("‘", "'").replace("’", "'").lower()


def classify_failure(exit_status: int | None, stdout: str, stderr: str) -> NodeHealth:
    """Why an nvidia-smi run failed, from its exit status and what it printed."""
    text = _normalised(f"{stdout}\n{stderr}")
    if exit_status == 127 or "command not found" in text or "nvidia-smi: not found" in text:
        return NodeHealth.NO_NVIDIA_SMI
    if "driver/library version mismatch" in text:
        return NodeHealth.DRIVER_MISMATCH
    if exit_status == 12 or "couldn't find libnvidia-ml.so" in text:
        return NodeHealth.NVML_LIBRARY_MISSING
    if exit_status == 4 or "failed to initialize nvml: insufficient permissions" in text:
        return NodeHealth.NVML_PERMISSION
    if exit_status == 9 or "couldn't communicate with the nvidia driver" in text:
        return NodeHealth.DRIVER_NOT_LOADED
    if (
        exit_status == 15
        or "gpu is lost" in text
        or "unknown error" in text
        or "fallen off the bus" in text
        or "no devices were found" in text
        or "no supported gpus were found" in text
    ):
        return NodeHealth.GPU_LOST
    return NodeHealth.GARBAGE


def human_reason(health: NodeHealth) -> str:
    """A short line for the user saying what a NodeHealth means."""
    return reason(health)


__all__ = ["classify_failure", "human_reason"]
