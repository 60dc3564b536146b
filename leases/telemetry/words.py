"""The words people read about a node's readings: what each NodeHealth means (the reason
shown beside an unreachable node, in alerts and the dashboard) and the short word for it.

Written in English and marked for the catalogue (N_); said in the language in use by
`reason` and `health_word`. Text stored in the ledger (a poll gap's detail) keeps the
English (`REASONS[health]`), said again through the catalogue when it is shown."""

from __future__ import annotations

from leases.core import valuewords
from leases.core.i18n import N_, _
from leases.core.models import NodeHealth
from leases.core.retold import shown

REASONS: dict[NodeHealth, str] = {
    NodeHealth.OK: N_("ok"),
    NodeHealth.CONNECTING: N_("connecting"),
    NodeHealth.UNREACHABLE: N_("unreachable: the node does not answer"),
    NodeHealth.TIMEOUT: N_("timed out waiting for the node"),
    NodeHealth.AUTH_FAILED: N_("ssh login refused: check the user and key"),
    NodeHealth.UNTRUSTED: N_("new host key: accept its fingerprint before zuka connects"),
    NodeHealth.HOSTKEY_CHANGED: N_("host key changed: refused (reinstalled node or interception)"),
    NodeHealth.NO_NVIDIA_SMI: N_("nvidia-smi not found on the node"),
    NodeHealth.DRIVER_NOT_LOADED: N_("the NVIDIA driver is not loaded on the node"),
    NodeHealth.DRIVER_MISMATCH: N_("driver/library version mismatch: the node needs a reboot"),
    NodeHealth.NVML_LIBRARY_MISSING: N_(
        "the NVIDIA driver's user-space library (libnvidia-ml.so) is missing: install the"
        " driver's utils package, or mount it into the container (NVIDIA container toolkit)"
    ),
    NodeHealth.NVML_PERMISSION: N_(
        "NVML refuses the login user (Insufficient Permissions): let it open /dev/nvidia*"
        " (the video or render group), or allow the devices in the container's device cgroup"
    ),
    NodeHealth.GPU_LOST: N_("a GPU is lost (fell off the bus): the node needs a reboot or repair"),
    NodeHealth.GARBAGE: N_("nvidia-smi printed output zuka could not read"),
    NodeHealth.NO_NVML: N_("no NVML on this host"),
    NodeHealth.REFUSED: N_("zuka will not connect to it as the ledger or ~/.ssh/config asks"),
}


def reason(health: NodeHealth | str) -> str:
    """A short line saying what a NodeHealth means, in the language in use."""
    return _(REASONS[NodeHealth(health)])


def health_word(health: NodeHealth | str) -> str:
    """A NodeHealth's short word in the language in use ("auth_failed": "auth failed" /
    "登录被拒")."""
    value = NodeHealth(health).value
    return valuewords.words(NodeHealth).get(value, value.replace("_", " "))


def stopped_word(value: str) -> str:
    """What a lease bills while stopped, in words ("storage_only": "storage only")."""
    return valuewords.words("leases.core.models.StoppedBilling").get(value, value.replace("_", " "))


def detail_said(detail: str) -> str:
    """A stored failure detail (a poll gap's, a node's: the poller speaks English) in the
    language in use, as far as zuka's own words go: a reason of REASONS that begins it is
    translated, the rest retold (leases.core.retold: an SSH error's message said again, the
    node's own words kept as they are)."""
    for said in REASONS.values():
        if detail == said:
            return _(said)
        for sep in (": ", "; "):
            if detail.startswith(said + sep):
                return _(said) + _(sep) + shown(detail[len(said) + len(sep) :])
    return shown(detail)
