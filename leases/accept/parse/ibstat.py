"""`ibstat` -> IbStat: each CA's ports with State, Physical state, Rate and Link layer.

"Rate: 2.5" (soft RoCE) is kept as 2 (whole Gb/s); "Rate: 100 Gb/sec (4X EDR)" as 100.
"ibpanic: ... No such file or directory" or no CA at all is named in problems.
"""

from __future__ import annotations

import re

from leases.accept.facts import IbPort, IbStat
from leases.accept.parse._text import Problems, lines_of, to_float
from leases.accept.words import _

MAX_PORTS = 256
_CA = re.compile(r"^\s*CA '([^']{1,64})'\s*$")
_PORT = re.compile(r"^\s*Port (\d{1,3}):\s*$", re.IGNORECASE)
_FIELD = re.compile(r"^\s*(State|Physical state|Rate|Link layer):\s*(.*?)\s*$")


def parse_ibstat(text: str) -> IbStat:
    problems = Problems()
    ports: list[IbPort] = []
    ca = ""
    port: dict[str, str] | None = None
    number = 0

    def close() -> None:
        if port is not None and len(ports) < MAX_PORTS:
            rate = to_float(port.get("Rate", "").split(" ")[0])
            ports.append(
                IbPort(
                    ca,
                    number,
                    port.get("State", "")[:32],
                    port.get("Physical state", "")[:32],
                    int(rate) if rate is not None and rate >= 0 else None,
                    port.get("Link layer", "")[:32],
                )
            )

    for line in lines_of(text):
        m = _CA.match(line)
        if m:
            close()
            ca, port = m.group(1), None
            continue
        m = _PORT.match(line)
        if m and ca:
            close()
            port, number = {}, int(m.group(1))
            continue
        m = _FIELD.match(line)
        if m and port is not None:
            port[m.group(1)] = m.group(2)
        elif "ibpanic" in line or "ibwarn" in line:
            problems.add(_("ibstat said"), line)
    close()
    if not ports and not problems.result():
        problems.add(_("no CA with a port was found in the output"))
    return IbStat(tuple(ports), problems.result())
