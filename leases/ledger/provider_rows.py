"""The providers' rows: who rents the nodes out (a cloud account, a region); nodes refer to
their provider by id."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Provider
from leases.core.textsafe import visible
from leases.ledger import records
from leases.ledger.audit import AuditLog
from leases.ledger.records import readable


class ProviderRows(AuditLog):
    """The providers, a layer of a Ledger (see leases.ledger.store)."""

    def providers(self) -> list[Provider]:
        return [_provider(r) for r in self.rows("SELECT * FROM providers ORDER BY name")]

    def provider(self, name: str) -> Provider:
        rows = self.rows("SELECT * FROM providers WHERE name = ?", [name])
        if not rows:
            raise InputError("provider", name, _("no provider of that name in the ledger"))
        return _provider(rows[0])

    def add_provider(self, provider: Provider) -> Provider:
        with self.transaction() as conn:
            return self._insert_provider(conn, provider)

    # What `zuka provider edit` may change: the facts offboarding's preflight checks.
    PROVIDER_EDITABLE = (
        "region", "account_id", "account_alias", "credential_ref", "return_days",
        "reading_source", "prom_url", "prom_match", "prom_token_file",
    )  # fmt: skip

    def update_provider(self, name: str, changes: Mapping[str, Any]) -> Provider:
        """Change some fields of a provider (audited, undoable); the result is validated
        as a whole. Its nodes follow it: they refer to it by id."""
        unknown = set(changes) - set(self.PROVIDER_EDITABLE)
        if unknown:
            field = sorted(unknown)[0]
            raise InputError(field, changes[field], _("cannot be changed by provider edit"))
        with self.transaction() as conn:
            rows = self.rows("SELECT * FROM providers WHERE name = ?", [name])
            if not rows:
                raise InputError("provider", name, _("no provider of that name in the ledger"))
            current = _provider(rows[0])
            before = records.provider_record(current)
            after = records.provider_record(records.provider_from({**before, **changes}))
            if after == before:
                return current
            conn.execute(
                f"UPDATE providers SET {', '.join(f'{k} = ?' for k in after)} WHERE id = ?",
                [*after.values(), current.id],
            )
            self.audit(conn, "provider.edit", "provider", current.id, None, before, after)
            return _provider({**after, "id": current.id})

    def _insert_provider(self, conn: sqlite3.Connection, p: Provider) -> Provider:
        # Aliyun and aliyun are one provider to a person: unique without regard to case.
        same = conn.execute(
            "SELECT name FROM providers WHERE lower(name) = lower(?)", [p.name]
        ).fetchone()
        if same:
            raise InputError(
                "provider",
                p.name,
                _("a provider of that name already exists ({same})").format(same=same[0]),
            )
        rec = records.provider_record(p)
        cur = conn.execute(
            f"INSERT INTO providers ({', '.join(rec)}) VALUES ({', '.join('?' * len(rec))})",
            list(rec.values()),
        )
        self.audit(conn, "provider.add", "provider", cur.lastrowid, None, None, rec)
        return _provider({**rec, "id": cur.lastrowid})

    def provider_id(self, conn: sqlite3.Connection, name: str | None) -> int | None:
        """The id of the provider of that name (None: no provider); refused if none has it."""
        if name is None:
            return None
        row = conn.execute("SELECT id FROM providers WHERE name = ?", [name]).fetchone()
        if row is None:
            raise InputError(
                "provider", name, _("no provider of that name (add it with `zuka provider add`)")
            )
        return int(row[0])

    def readable_providers(self) -> tuple[list[Provider], list[str]]:
        """As readable_leases, of providers."""
        rows = self.rows("SELECT * FROM providers ORDER BY name")
        return readable(
            rows, _provider, lambda r: f"provider {r['id']} ({visible(r['name'], 80)!r})"
        )


def _provider(row: Mapping[str, Any]) -> Provider:
    return replace(records.provider_from(row), id=row["id"])
