"""A Prometheus URL's host judged as a notification URL's (leases.notify.host): no
link-local or cloud metadata address in any spelling, nor a name resolving to one now
(the reader judges it again at every connect). The ledger checks the rest of the URL.
A token file given is read as the reader will read it (leases.core.tokenfile): a FIFO, a
link, a file others may read is refused when it is given, not at the first poll."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from leases.core.errors import InputError
from leases.core.promsource import check_token_file, check_url
from leases.core.tokenfile import read_token
from leases.notify.host import resolved_refusal, system_resolver


def refuse_prom_host(changes: Mapping[str, Any], *, resolve: bool = True) -> None:
    """Refuse a record's prom_url whose host zuka must not read from."""
    raw = changes.get("prom_url")
    if raw is None or not str(raw).strip():
        return
    url = check_url(str(raw))
    host = urllib.parse.urlsplit(url).hostname or ""
    said = resolved_refusal(host, None, system_resolver if resolve else None)
    if said is not None:
        raise InputError("prom_url", url, f"zuka does not read from there: {said}")


def refuse_prom_token(changes: Mapping[str, Any]) -> None:
    """Refuse a record's prom_token_file that is not a private token file of this user's."""
    raw = changes.get("prom_token_file")
    if raw is None or not str(raw).strip():
        return
    read_token(check_token_file(str(raw)), "prom_token_file", "the Prometheus queries")
