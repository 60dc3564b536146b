"""Alert state in the ledger: what is open, since when, acknowledged or snoozed.

An evaluation (leases.alerts.rules) is reconciled with the stored alerts in one transaction:
- an alert reported at RAISE with no stored one opens a new row;
- one reported at RAISE or HOLD whose row is open updates it (last seen, message);
  a higher severity than before is an escalation;
- a row not reported any more is cleared;
- a RAISE within REOPEN_HOLD of its row's clearing re-opens that row: a condition that
  flickers is one alert, not many. Its acknowledgement is over (it lasted until the
  clearing); a higher severity than the row had is an escalation.
One owner of "new": a new alert and an escalation are written to the table alert_outbox
in that same transaction, whichever process evaluates first (the collector, `zuka alerts`,
`zuka alerts check`, the dashboard); a notifier takes each row once (leases.alerts.watch).
Reading alerts therefore never changes what gets sent.
Acknowledged: hidden until it clears, or until its severity rises above the one it was
acknowledged at. Snoozed: hidden until a time, or until its severity rises.

Messages and actions (of alerts and alert_outbox) are stored language-neutral
(leases.alerts.said.encode: a message id and its arguments) and said in the language in use
when read (StoredAlert.message is that text): a Chinese dashboard and an English collector
read the same row each in its own words, and `--json` (written under English) is the same
bytes in every language. Rows stored before, in plain English, are shown as they are.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from leases.alerts.alert import Alert, Level
from leases.alerts.said import decode, encode
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.severity import Severity
from leases.ledger.store import Ledger

REOPEN_HOLD = timedelta(hours=1)
# A duration's units, as typed and as zuka writes them in Chinese (leases.core.spoken:
# "1天", "6小时30分钟"); "个" as in "2个小时", "1个星期". ASCII digits only.
_UNIT_S = {
    "s": 1, "秒": 1, "秒钟": 1,
    "m": 60, "min": 60, "分": 60, "分钟": 60,
    "h": 3600, "时": 3600, "小时": 3600, "个小时": 3600,
    "d": 86400, "天": 86400, "日": 86400,
    "w": 7 * 86400, "周": 7 * 86400, "星期": 7 * 86400, "个星期": 7 * 86400,
}  # fmt: skip
_UNIT = "|".join(sorted(map(re.escape, _UNIT_S), key=len, reverse=True))  # longest first
_PART = re.compile(rf"([0-9]+(?:\.[0-9]+)?)\s*({_UNIT})")
# One part or several, each unit once at most ("6小时30分钟", "1d12h").
_DURATION = re.compile(rf"^\s*(?:{_PART.pattern}\s*){{1,5}}$")
MAX_SNOOZE = timedelta(days=90)
# Rows of alert_outbox older than this are deleted (taken or not: no notifier was running).
OUTBOX_KEPT = timedelta(days=30)


class State(StrEnum):
    OPEN = "open"
    ACKED = "acked"
    SNOOZED = "snoozed"
    CLEARED = "cleared"


class Change(StrEnum):
    NEW = "new"
    ESCALATED = "escalated"  # its severity rose: worth telling again
    REOPENED = "reopened"
    UPDATED = "updated"
    CLEARED = "cleared"


@dataclass(frozen=True)
class StoredAlert:
    id: int
    kind: str
    node_id: int | None
    node: str
    lease_id: int | None
    lease_start: datetime | None
    key: str
    severity: Severity
    message: str
    action: str
    yuan: Decimal | None
    first_seen: datetime
    last_seen: datetime
    cleared_at: datetime | None
    acked_at: datetime | None
    acked_by: str | None
    snoozed_until: datetime | None
    # The currency of `yuan`: its lease's (None: the lease is gone from the ledger).
    currency: str | None = None
    # The severity it had when acknowledged: a higher one shows it again.
    acked_severity: Severity | None = None

    def state(self, now: datetime) -> State:
        if self.cleared_at is not None:
            return State.CLEARED
        if self.acked_at is not None and not self._rose_since(self.acked_severity):
            return State.ACKED
        if self.snoozed_until is not None and self.snoozed_until > now:
            return State.SNOOZED
        return State.OPEN

    def _rose_since(self, then: Severity | None) -> bool:
        return then is not None and self.severity.rank > then.rank

    @property
    def identity(self) -> tuple[str, int | None, int | None, str]:
        return (self.kind, self.node_id, self.lease_id, self.key)


@dataclass(frozen=True)
class Changed:
    change: Change
    alert: StoredAlert


def parse_duration(value: str, field: str = "for") -> timedelta:
    """30m, 2h, 1d, 1w (s, m, h, d, w), in Chinese units as zuka writes them too (30分钟,
    2小时, 1天, 1周: 秒, 分/分钟, 时/小时, 天/日, 周/星期), or parts of them ("6小时30分钟",
    "1d12h"); InputError naming the field otherwise."""
    text = value or ""
    parts = _PART.findall(text) if _DURATION.match(text) else []
    sizes = [_UNIT_S[unit] for _n, unit in parts]
    if not parts or len(set(sizes)) != len(sizes):  # "1h2h" is no duration
        raise InputError(field, value, _("a duration such as 30m, 2h, 1d or 1w"))
    # Checked as seconds before a timedelta is built: a huge one would overflow it.
    seconds = sum(float(n) * _UNIT_S[unit] for n, unit in parts)
    if not 0 < seconds <= MAX_SNOOZE.total_seconds():
        raise InputError(field, value, _("must be more than zero and at most 90 days"))
    return timedelta(seconds=seconds)


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _dt(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


_SELECT = (
    "SELECT a.id, a.kind, a.node_id, a.node, a.lease_id, l.start, a.key, a.severity,"
    " a.message, a.action, a.yuan, a.first_seen, a.last_seen, a.cleared_at, a.acked_at,"
    " a.acked_by, a.snoozed_until, l.currency, a.acked_severity FROM alerts a"
    " LEFT JOIN leases l ON l.id = a.lease_id"
)


def _row(r: Sequence[object]) -> StoredAlert:
    return StoredAlert(
        int(r[0]),  # type: ignore[call-overload]
        str(r[1]),
        r[2],  # type: ignore[arg-type]
        str(r[3]),
        r[4],  # type: ignore[arg-type]
        _dt(r[5]),  # type: ignore[arg-type]
        str(r[6]),
        Severity(str(r[7])),
        decode(str(r[8])),  # said in the language in use (leases.alerts.said)
        decode(str(r[9])),
        None if r[10] is None else Decimal(str(r[10])),
        datetime.fromisoformat(str(r[11])),
        datetime.fromisoformat(str(r[12])),
        _dt(r[13]),  # type: ignore[arg-type]
        _dt(r[14]),  # type: ignore[arg-type]
        None if r[15] is None else str(r[15]),
        _dt(r[16]),  # type: ignore[arg-type]
        None if r[17] is None else str(r[17]),
        None if r[18] is None else Severity(str(r[18])),
    )


def _select(
    conn: sqlite3.Connection, where: str = "", params: Sequence[object] = ()
) -> list[StoredAlert]:
    return [_row(r) for r in conn.execute(f"{_SELECT} {where} ORDER BY a.id", params)]


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def _tell(
    conn: sqlite3.Connection, change: Change, alert_id: int, alert: Alert, now: datetime
) -> None:
    """Queue a change for the notifiers, in the caller's transaction (see the docstring).
    Keyed by alert, change, severity and time: the same change told twice at one instant
    (a clock that stands still) is one row."""
    conn.execute(
        "INSERT OR IGNORE INTO alert_outbox (alert_id, change, severity, message, action, at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            alert_id,
            change.value,
            alert.severity.value,
            encode(alert.message),
            encode(alert.action),
            _utc(now),
        ),
    )


def by_ids(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, StoredAlert]:
    """The stored alerts of these ids (those that exist), on a connection of the caller's."""
    if not ids:
        return {}
    return {a.id: a for a in _select(conn, f"WHERE a.id IN ({','.join('?' * len(ids))})", ids)}


def reconcile(
    ledger: Ledger,
    alerts: Sequence[Alert],
    now: datetime,
    unjudged: Collection[tuple[int | None, str]] = (),
) -> list[Changed]:
    """Store an evaluation: see the module's docstring. Returns what changed. `unjudged`:
    (node id, kind) no rule judged this time (leases.alerts.rules.unjudged): open ones stay open."""
    changes: list[tuple[Change, int]] = []
    with ledger.transaction() as conn:
        recent = _select(
            conn, "WHERE a.cleared_at IS NULL OR a.cleared_at >= ?", [_iso(now - REOPEN_HOLD)]
        )
        open_rows = {a.identity: a for a in recent if a.cleared_at is None}
        # The latest cleared row of each identity (ids grow with time).
        cleared = {a.identity: a for a in recent if a.cleared_at is not None}
        seen: set[tuple[str, int | None, int | None, str]] = set()
        for alert in alerts:
            ident = alert.identity
            if ident in seen:
                continue
            seen.add(ident)
            row = open_rows.get(ident)
            values = (alert.severity.value, encode(alert.message), encode(alert.action),
                      None if alert.yuan is None else str(alert.yuan), _iso(now))  # fmt: skip
            if row is not None:
                rose = alert.severity.rank > row.severity.rank
                conn.execute(
                    "UPDATE alerts SET severity = ?, message = ?, action = ?, yuan = ?,"
                    " last_seen = ? WHERE id = ?",
                    (*values, row.id),
                )
                if rose:
                    # A snooze was given to the milder alert: the worse one shows at once.
                    conn.execute("UPDATE alerts SET snoozed_until = NULL WHERE id = ?", [row.id])
                    _tell(conn, Change.ESCALATED, row.id, alert, now)
                changes.append((Change.ESCALATED if rose else Change.UPDATED, row.id))
                continue
            if alert.level is not Level.RAISE:
                continue
            old = cleared.get(ident)
            if old is not None and old.id not in {i for _c, i in changes}:
                # The acknowledgement lasted until the clearing: this is a new episode.
                conn.execute(
                    "UPDATE alerts SET severity = ?, message = ?, action = ?, yuan = ?,"
                    " last_seen = ?, cleared_at = NULL, acked_at = NULL, acked_by = NULL,"
                    " acked_severity = NULL WHERE id = ?",
                    (*values, old.id),
                )
                # Back at a higher severity than it cleared at (86 °C, cleared, 95 °C):
                # told, even within the hour; back as it was: a flicker, not told again.
                if alert.severity.rank > old.severity.rank:
                    _tell(conn, Change.ESCALATED, old.id, alert, now)
                    changes.append((Change.ESCALATED, old.id))
                else:
                    changes.append((Change.REOPENED, old.id))
                continue
            cur = conn.execute(
                "INSERT INTO alerts (kind, node_id, node, lease_id, key, severity, message,"
                " action, yuan, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (alert.kind.value, alert.node_id, alert.node, alert.lease_id, alert.key,
                 *values[:4], _iso(now), _iso(now)),
            )  # fmt: skip
            new_id = int(cur.lastrowid or 0)
            _tell(conn, Change.NEW, new_id, alert, now)
            changes.append((Change.NEW, new_id))
        for ident, row in open_rows.items():
            if ident not in seen and (ident[1], ident[0]) not in unjudged:
                conn.execute("UPDATE alerts SET cleared_at = ? WHERE id = ?", (_iso(now), row.id))
                changes.append((Change.CLEARED, row.id))
        conn.execute("DELETE FROM alert_outbox WHERE at < ?", [_utc(now - OUTBOX_KEPT)])
        by_id = by_ids(conn, [i for _c, i in changes])
    return [Changed(c, by_id[i]) for c, i in changes if i in by_id]


def alerts(ledger: Ledger, now: datetime, *, everything: bool = False) -> list[StoredAlert]:
    """Open alerts (not acknowledged, not snoozed), worst first; everything: all rows."""
    rows = _select(ledger.conn, "" if everything else "WHERE a.cleared_at IS NULL")
    if not everything:
        rows = [a for a in rows if a.state(now) is State.OPEN]
    return sorted(rows, key=lambda a: (-a.severity.rank, a.cleared_at is not None, a.id))


def get(ledger: Ledger, alert_id: int) -> StoredAlert:
    found = _select(ledger.conn, "WHERE a.id = ?", [alert_id])
    if not found:
        raise InputError(
            "id", alert_id, _("no alert {id} (see zuka alerts --all)").format(id=alert_id)
        )
    return found[0]


def _open(ledger: Ledger, alert_id: int) -> StoredAlert:
    row = get(ledger, alert_id)
    if row.cleared_at is not None:
        raise InputError("id", alert_id, _("this alert has cleared: nothing to acknowledge"))
    return row


def ack(ledger: Ledger, alert_id: int, now: datetime, by: str) -> StoredAlert:
    """Acknowledge an open alert: hidden until it clears or its severity rises."""
    _open(ledger, alert_id)
    with ledger.transaction() as conn:
        # At its severity now: a higher one later shows it again (StoredAlert.state).
        conn.execute(
            "UPDATE alerts SET acked_at = ?, acked_by = ?, acked_severity = severity WHERE id = ?",
            (_iso(now), by[:80], alert_id),
        )
    return get(ledger, alert_id)


def snooze(ledger: Ledger, alert_id: int, until: datetime) -> StoredAlert:
    """Hide an open alert until a time (it comes back then if it still holds)."""
    _open(ledger, alert_id)
    with ledger.transaction() as conn:
        conn.execute("UPDATE alerts SET snoozed_until = ? WHERE id = ?", (_iso(until), alert_id))
    return get(ledger, alert_id)


def reopen(ledger: Ledger, alert_id: int) -> StoredAlert:
    """Undo an acknowledgement or a snooze: the alert is open (shown) again."""
    row = _open(ledger, alert_id)
    if row.acked_at is None and row.snoozed_until is None:
        raise InputError("id", alert_id, _("this alert is open: nothing to undo"))
    with ledger.transaction() as conn:
        conn.execute(
            "UPDATE alerts SET acked_at = NULL, acked_by = NULL, acked_severity = NULL,"
            " snoozed_until = NULL WHERE id = ?",
            (alert_id,),
        )
    return get(ledger, alert_id)
