"""The notifier: delivery of notification messages through an outbox in the ledger.

Delivery (Notifier) runs in one worker thread: submit() only puts the message on a bounded
in-memory queue, so a dead or hanging endpoint never stalls the caller (the poller); the
worker sends to different targets in parallel, so one never delays another, and a failed
row waits for its retry without holding up the rows after it. The worker keeps an outbox
in the ledger (table notify_outbox): messages below min_severity are dropped; a key
already sent to a target within dedupe_hours is not sent again; at most
rate_limit_per_hour messages go to a target in any hour (the rest wait), but a critical one
never waits (it goes first, and counts against the hour's room of the others); with a daily
digest, non-critical messages are collected and sent as one at the digest time (a critical
one is sent at once); a failed send is retried with backoff (30 s doubling to 1 h) for
retry_hours. The ledger never holds a URL (its token is a secret): rows name their target
by a hash of the URL.
Besides submit(), messages come from feeds (add_feed): ledger tables that other processes
write (the alerts' outbox, leases.alerts.watch), taken in the same transaction that queues
them here, so that each is queued exactly once whichever process wrote it.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from zoneinfo import ZoneInfo

from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import ngettext
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.notify.message import BODY_CHARS, TITLE_CHARS, Message, severity_word
from leases.notify.send import Sender, SendResult, send
from leases.notify.url import Target, parse_target, scrub

if TYPE_CHECKING:
    from leases.config.sections import NotifyConfig
    from leases.ledger.store import Ledger

BACKOFF_FIRST_S = 30.0
BACKOFF_CAP_S = 3600.0
PURGE_AFTER = timedelta(days=30)


class Feed(Protocol):
    """Messages that wait in the ledger for a notifier (see Notifier.add_feed)."""

    def waiting(self, conn: sqlite3.Connection) -> bool:
        """Whether take() would find anything (a read: most rounds find nothing)."""
        ...

    def take(self, conn: sqlite3.Connection, now: datetime) -> list[Message]:
        """The waiting messages, marked taken, inside the outbox's write transaction."""
        ...

    def current(self, conn: sqlite3.Connection, key: str) -> Message | bool | None:
        """A message of this feed that waited (the rate limit) as it should go out now:
        the message with today's words, False when it is no longer true (its alert
        cleared or was told worse since), None for a key that is not this feed's."""
        ...


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def backoff_s(attempts: int) -> float:
    """Wait before the next try after `attempts` failed ones."""
    return float(min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1)))


class Notifier:
    """Delivers messages in a worker thread (start()), or in the caller with pump().

    submit() never blocks; everything slow (the network, the ledger) happens in pump().
    """

    def __init__(
        self,
        config: NotifyConfig,
        ledger_path: Path | None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        tz: str = DEFAULT_TZ,
        sender: Sender = send,
        queue_size: int = 1000,
    ) -> None:
        self.config = config
        self.targets = [parse_target(u) for u in config.urls]
        self._by_ref = {t.ref: t for t in self.targets}
        self.clock = clock
        self.tz = ZoneInfo(tz)
        self.sender = sender
        self.dropped = 0
        self._path = ledger_path
        self._ledger: Ledger | None = None
        self._inbox: queue.Queue[Message] = queue.Queue(maxsize=queue_size)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._purged: datetime | None = None
        self._feeds: tuple[Feed, ...] = ()

    # -- the caller's side ----------------------------------------------------------------

    def submit(self, message: Message) -> bool:
        """Queue a message; False when the queue is full (the worker is far behind)."""
        try:
            self._inbox.put_nowait(message)
        except queue.Full:
            self.dropped += 1
            return False
        self._wake.set()
        return True

    def add_feed(self, feed: Feed) -> None:
        """Take messages from `feed` on every round too (once: an equal feed is not added
        twice). Safe while the worker runs: the tuple is replaced, never changed."""
        if feed not in self._feeds:
            self._feeds = (*self._feeds, feed)

    def wake(self) -> None:
        """Run a round now (a feed may have something): never blocks."""
        self._wake.set()

    def start(self) -> Notifier:
        self._thread = threading.Thread(target=self._loop, name="zuka-notify", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the worker; False if it is still inside a send after timeout seconds
        (a daemon thread: it ends with the process)."""
        thread = self._thread
        if thread is None:
            self._close_ledger()
            return True
        self._stop.set()
        self._wake.set()
        thread.join(timeout)
        return not thread.is_alive()

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the worker's side ----------------------------------------------------------------

    def _loop(self) -> None:
        log = logging.getLogger(__name__)
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    wait = self.pump()
                except Exception as exc:
                    # The type only: a message or traceback may quote a URL and its token.
                    log.error("notification round failed (%s); again in 30 s", type(exc).__name__)
                    wait = 30.0
                self._wake.wait(wait)
        finally:
            self._close_ledger()

    def _close_ledger(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def _db(self) -> Ledger:
        if self._ledger is None:
            from leases.ledger.store import Ledger

            self._ledger = Ledger.open(self._path)
        return self._ledger

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._db().transaction() as conn:
            yield conn

    def outbox_rows(self) -> list[dict[str, Any]]:
        """The outbox, oldest first (from the thread that pumps)."""
        cur = self._db().conn.execute("SELECT * FROM notify_outbox ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def pump(self) -> float:
        """Take what was submitted, build a due digest, send what is due. Returns the
        seconds until something may be due again."""
        now = self.clock()
        if not self.targets:  # nothing to send to: no ledger rows, no ledger opened
            while not self._inbox.empty():
                self._inbox.get_nowait()
            return 60.0
        self._intake(now)
        if self.config.digest_at is not None:
            self._digest(now, self.config.digest_at)
        self._send_due(now)
        if self._purged is None or now - self._purged > timedelta(hours=1):
            with self._write() as conn:
                conn.execute(
                    "DELETE FROM notify_outbox WHERE state NOT IN ('pending', 'digest')"
                    " AND created_at < ?",
                    [_iso(now - PURGE_AFTER)],
                )
            self._purged = now
        row = (
            self._db()
            .conn.execute("SELECT min(next_at) FROM notify_outbox WHERE state = 'pending'")
            .fetchone()
        )
        if row[0] is None:
            return 60.0
        due = (datetime.fromisoformat(row[0]) - now).total_seconds()
        return min(60.0, max(0.5, due))

    def _intake(self, now: datetime) -> None:
        messages: list[Message] = []
        while True:
            try:
                messages.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        fed = [f for f in self._feeds if f.waiting(self._db().conn)]
        if not messages and not fed:
            return
        since = _iso(now - timedelta(hours=self.config.dedupe_hours))
        with self._write() as conn:
            for feed in fed:
                messages.extend(feed.take(conn, now))
            for m in messages:
                if not m.severity.at_least(self.config.min_severity):
                    continue
                digest = self.config.digest_at is not None and m.severity is not Severity.CRITICAL
                for t in self.targets:
                    seen = conn.execute(
                        "SELECT 1 FROM notify_outbox WHERE target = ? AND key = ?"
                        " AND created_at > ? AND state != 'failed' LIMIT 1",
                        [t.ref, m.dedupe_key[:500], since],
                    ).fetchone()
                    if seen is None:
                        self._insert(conn, t, m, "digest" if digest else "pending", now)

    @staticmethod
    def _insert(conn: sqlite3.Connection, t: Target, m: Message, state: str, now: datetime) -> None:
        conn.execute(
            "INSERT INTO notify_outbox (target, key, title, body, severity, state,"
            " created_at, next_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                t.ref,
                m.dedupe_key[:500],
                m.title[: TITLE_CHARS * 2],
                m.body[: BODY_CHARS * 2],
                m.severity.value,
                state,
                _iso(now),
                _iso(now),
            ],
        )

    def _digest(self, now: datetime, at: dtime) -> None:
        """At the digest time, the messages collected before it go out as one."""
        local = now.astimezone(self.tz)
        slot = local.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
        if slot > local:
            slot -= timedelta(days=1)
        with self._write() as conn:
            for t in self.targets:
                rows = conn.execute(
                    "SELECT id, title, body, severity FROM notify_outbox WHERE target = ?"
                    " AND state = 'digest' AND created_at <= ? ORDER BY id",
                    [t.ref, _iso(slot)],
                ).fetchall()
                if not rows:
                    continue
                worst = max((Severity(r[3]) for r in rows), key=lambda s: s.rank)
                lines = [f"- [{severity_word(str(r[3]))}] {r[1]}: "
                         f"{str(r[2]).splitlines()[0] if r[2] else ''}" for r in rows]  # fmt: skip
                title = ngettext(
                    "daily digest: {n} message", "daily digest: {n} messages", len(rows)
                ).format(n=len(rows))
                digest = Message(title, "\n".join(lines), worst, f"digest:{slot:%Y-%m-%d}")
                self._insert(conn, t, digest, "pending", now)
                conn.executemany(
                    "UPDATE notify_outbox SET state = 'digested' WHERE id = ?",
                    [(r[0],) for r in rows],
                )

    def _send_due(self, now: datetime) -> None:
        """Every target's due rows, oldest first; targets in parallel (a slow one delays
        no other); at a target, one failure ends its round (the rest wait for the next)."""
        rows = (
            self._db()
            .conn.execute(
                "SELECT id, target, key, title, body, severity, created_at, attempts"
                " FROM notify_outbox WHERE state = 'pending' AND next_at <= ? ORDER BY id",
                [_iso(now)],
            )
            .fetchall()
        )
        due: dict[str, list[tuple[Any, ...]]] = {}
        hour_ago = _iso(now - timedelta(hours=1))
        with self._write() as conn:
            for row in rows:
                if row[1] not in self._by_ref:
                    conn.execute(
                        "UPDATE notify_outbox SET state = 'failed',"
                        " last_error = 'the URL is no longer configured' WHERE id = ?",
                        [row[0]],
                    )
                    continue
                # One that waited (the rate limit, retries) goes as it is true now: in
                # today's words, or not at all once its alert cleared or was told worse.
                fresh = self._current(conn, str(row[2]))
                if fresh is False:
                    conn.execute(
                        "UPDATE notify_outbox SET state = 'failed', last_error = 'no"
                        " longer true when it could go: not sent' WHERE id = ?",
                        [row[0]],
                    )
                    continue
                if isinstance(fresh, Message) and (fresh.title, fresh.body) != tuple(row[3:5]):
                    conn.execute(
                        "UPDATE notify_outbox SET title = ?, body = ? WHERE id = ?",
                        [fresh.title, fresh.body, row[0]],
                    )
                    row = (*row[:3], fresh.title, fresh.body, *row[5:])
                due.setdefault(row[1], []).append(row)
            for ref, queued in due.items():
                sent = conn.execute(
                    "SELECT count(*), min(sent_at) FROM notify_outbox"
                    " WHERE target = ? AND state = 'sent' AND sent_at > ?",
                    [ref, hour_ago],
                ).fetchone()
                # A critical message never waits for the hour: it goes first, and the
                # others have what room is left.
                critical = [r for r in queued if r[5] == Severity.CRITICAL.value]
                rest = [r for r in queued if r[5] != Severity.CRITICAL.value]
                room = max(0, self.config.rate_limit_per_hour - sent[0] - len(critical))
                if len(rest) > room:
                    first = datetime.fromisoformat(sent[1]) if sent[1] else now
                    free_at = max(first + timedelta(hours=1, seconds=1), now)
                    conn.executemany(
                        "UPDATE notify_outbox SET next_at = ? WHERE id = ?",
                        [(_iso(free_at), r[0]) for r in rest[room:]],
                    )
                    del rest[room:]
                queued[:] = critical + rest
        jobs = [(self._by_ref[ref], queued) for ref, queued in due.items() if queued]
        if not jobs:
            return
        import queue
        from concurrent.futures import ThreadPoolExecutor

        # Each result is recorded as soon as it is known, one row at a time: a collector
        # stopped (or killed) in the middle of a round has recorded what went out, and
        # sends it never again.
        told: queue.Queue[tuple[Target, tuple[int, str, int], SendResult]] = queue.Queue()
        with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
            futures = [pool.submit(self._deliver, target, rows, told.put) for target, rows in jobs]
            while True:
                try:
                    target, (row_id, created, attempts), result = told.get(timeout=0.1)
                except queue.Empty:
                    if all(f.done() for f in futures) and told.empty():
                        break
                    continue
                with self._write() as conn:
                    self._record(conn, target, row_id, created, attempts, result, now)
        for f in futures:
            f.result()  # a fault in _deliver itself is not swallowed

    def _current(self, conn: sqlite3.Connection, key: str) -> Message | bool | None:
        for feed in self._feeds:
            found = feed.current(conn, key)
            if found is not None:
                return found
        return None

    def _deliver(
        self,
        target: Target,
        rows: list[tuple[Any, ...]],
        tell: Callable[[tuple[Target, tuple[int, str, int], SendResult]], None],
    ) -> None:
        """One target's rows in order, until one fails, each result told as it comes (runs
        in a pool thread: no ledger)."""
        for row_id, _, key, title, body, severity, created, attempts in rows:
            message = Message(title, body, Severity(severity), key)
            try:
                result = self.sender(target, message, self.config.timeout_s)
            except Exception as exc:  # a sender's bug fails this row, never the round
                result = SendResult(target, False, f"{type(exc).__name__}: {visible(exc, 200)}")
            tell((target, (row_id, created, attempts), result))
            if not result.ok:
                break

    def _record(
        self,
        conn: sqlite3.Connection,
        target: Target,
        row_id: int,
        created: str,
        attempts: int,
        result: SendResult,
        now: datetime,
    ) -> None:
        tries = attempts + 1
        if result.ok:
            conn.execute(
                "UPDATE notify_outbox SET state = 'sent', sent_at = ?, attempts = ?,"
                " last_error = '' WHERE id = ?",
                [_iso(now), tries, row_id],
            )
            return
        give_up = now - datetime.fromisoformat(created) >= timedelta(hours=self.config.retry_hours)
        conn.execute(
            "UPDATE notify_outbox SET state = ?, attempts = ?, last_error = ?,"
            " next_at = ? WHERE id = ?",
            [
                "failed" if give_up else "pending",
                tries,
                visible(scrub(target, result.detail), 500),
                _iso(now + timedelta(seconds=backoff_s(tries))),
                row_id,
            ],
        )
