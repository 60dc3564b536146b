"""The ledger's schema, as versioned migrations (sqlite-utils Migrations).

A migration is never edited once released: add a new one. CHECK constraints repeat the
domain's rules so that no writer, however buggy, can store an impossible row.
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database, Migrations

MIGRATIONS = Migrations("zuka")


def _run(db: Database, script: str) -> None:
    """Run statements one by one: executescript() would COMMIT the migration's transaction."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            db.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement in migration: {pending[:60]!r}")


@MIGRATIONS()
def m001_ledger(db: Database) -> None:
    _run(
        db,
        """
        CREATE TABLE providers (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('cloud', 'platform', 'colo')),
            name TEXT NOT NULL UNIQUE,
            region TEXT NOT NULL DEFAULT '',
            account_id TEXT NOT NULL DEFAULT '',
            account_alias TEXT NOT NULL DEFAULT '',
            credential_ref TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE nodes (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            provider_id INTEGER REFERENCES providers(id),
            ssh_host TEXT NOT NULL,
            ssh_port INTEGER CHECK (ssh_port BETWEEN 1 AND 65535),
            ssh_user TEXT,
            ssh_key_path TEXT,
            ssh_jump TEXT,
            ssh_alias INTEGER NOT NULL DEFAULT 0,
            gpu_model TEXT NOT NULL DEFAULT '',
            gpu_count INTEGER NOT NULL DEFAULT 0 CHECK (gpu_count >= 0),
            vram_gib INTEGER CHECK (vram_gib > 0),
            interconnect TEXT NOT NULL DEFAULT 'unknown'
                CHECK (interconnect IN ('nvlink', 'pcie', 'unknown')),
            tags TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL DEFAULT 'active'
                CHECK (state IN ('active', 'offboarding', 'released')),
            local INTEGER NOT NULL DEFAULT 0,
            notes TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE leases (
            id INTEGER PRIMARY KEY,
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            billing_type TEXT NOT NULL CHECK (billing_type IN
                ('per_second', 'hourly', 'card_hour', 'daily', 'weekly', 'monthly', 'contract')),
            unit_price TEXT NOT NULL,
            currency TEXT NOT NULL DEFAULT 'CNY',
            cards_billed INTEGER CHECK (cards_billed > 0),
            start TEXT NOT NULL,
            "end" TEXT,
            billing_tz TEXT NOT NULL DEFAULT 'Asia/Shanghai',
            auto_renew INTEGER NOT NULL DEFAULT 0,
            min_commitment INTEGER,
            deposit TEXT,
            deposit_paid_on TEXT,
            deposit_refund TEXT NOT NULL DEFAULT 'none'
                CHECK (deposit_refund IN ('none', 'pending', 'refunded', 'forfeited')),
            deposit_refunded_on TEXT,
            contract_no TEXT NOT NULL DEFAULT '',
            notice_days INTEGER,
            on_expiry TEXT NOT NULL DEFAULT 'released'
                CHECK (on_expiry IN ('released', 'hourly', 'renews')),
            release_after_stopped_days INTEGER,
            notes TEXT NOT NULL DEFAULT '',
            ended_at TEXT,
            UNIQUE (node_id, start)
        );
        CREATE INDEX leases_node ON leases(node_id);
        CREATE TABLE resources (
            id INTEGER PRIMARY KEY,
            lease_id INTEGER NOT NULL REFERENCES leases(id),
            kind TEXT NOT NULL CHECK (kind IN ('disk', 'snapshot', 'image', 'bucket',
                'bucket_prefix', 'ssh_key', 'scratch_path', 'eip')),
            native_id TEXT NOT NULL,
            region TEXT NOT NULL DEFAULT '',
            endpoint TEXT NOT NULL DEFAULT '',
            created TEXT,
            deleted_at TEXT,
            verified_at TEXT,
            notes TEXT NOT NULL DEFAULT '',
            UNIQUE (lease_id, kind, native_id)
        );
        CREATE INDEX resources_lease ON resources(lease_id);
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            actor TEXT NOT NULL DEFAULT '',
            action TEXT NOT NULL,
            entity TEXT NOT NULL,
            entity_id INTEGER,
            node TEXT,
            before TEXT,
            after TEXT
        );
        CREATE INDEX audit_node ON audit(node);
        CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
            BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
        CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
            BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
        """,
    )


@MIGRATIONS()
def m002_history(db: Database) -> None:
    _run(
        db,
        """
        CREATE TABLE gpu_minute (
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            minute INTEGER NOT NULL,
            gpus BLOB NOT NULL,
            PRIMARY KEY (node_id, minute)
        ) WITHOUT ROWID;
        CREATE TABLE gpu_hour (
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            hour INTEGER NOT NULL,
            gpus BLOB NOT NULL,
            busy_card_minutes INTEGER NOT NULL,
            known_card_minutes INTEGER NOT NULL,
            PRIMARY KEY (node_id, hour)
        ) WITHOUT ROWID;
        CREATE TABLE poll_gap (
            id INTEGER PRIMARY KEY,
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            start TEXT NOT NULL,
            "end" TEXT,
            health TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX poll_gap_node ON poll_gap(node_id, start);
        CREATE TABLE node_latest (
            node_id INTEGER PRIMARY KEY REFERENCES nodes(id),
            at TEXT NOT NULL,
            health TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '',
            fingerprint TEXT,
            gpus TEXT NOT NULL DEFAULT '[]',
            processes TEXT NOT NULL DEFAULT '[]'
        );
        CREATE TABLE alerts (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            node TEXT,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            cleared_at TEXT
        );
        CREATE INDEX alerts_open ON alerts(node, kind, cleared_at);
        """,
    )


@MIGRATIONS()
def m003_busy_index(db: Database) -> None:
    # Busy card-hours over 30 days read 144k hour rows for a 200-node fleet: a covering
    # index lets that sum skip the packed per-GPU blobs.
    _run(
        db,
        "CREATE INDEX gpu_hour_busy ON gpu_hour"
        " (node_id, hour, busy_card_minutes, known_card_minutes);\n",
    )


@MIGRATIONS()
def m004_audit_chain(db: Database) -> None:
    """Hash-chain the audit log (see leases.ledger.auditchain): every entry gets the hash of the
    one before it and its own; existing entries are chained in id order. The triggers
    are replaced by ones that also refuse an insert that does not extend the chain
    (INSERT OR REPLACE of an old id, a forged prev_hash)."""
    from leases.ledger.auditchain import AUDIT_TRIGGERS, links

    _run(
        db,
        """
        DROP TRIGGER audit_no_update;
        DROP TRIGGER audit_no_delete;
        ALTER TABLE audit ADD COLUMN prev_hash TEXT;
        ALTER TABLE audit ADD COLUMN hash TEXT;
        """,
    )
    cur = db.execute("SELECT * FROM audit ORDER BY id")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, values, strict=True)) for values in cur.fetchall()]
    for entry_id, prev, digest in links(rows):
        db.execute(
            "UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", [prev, digest, entry_id]
        )
    for sql in AUDIT_TRIGGERS.values():
        db.execute(sql)


@MIGRATIONS()
def m005_reusable_names(db: Database) -> None:
    """A node's name is unique among live nodes only, so that a released (archived) node's
    name can be given to a new one. SQLite cannot drop a UNIQUE constraint: the table is
    rebuilt (https://www.sqlite.org/lang_altertable.html#otheralter) with its ids kept, so
    that leases, GPU history and the audit log still point at the same nodes. The ledger
    runs migrations with foreign keys off; the check below stands in for them."""
    _run(
        db,
        """
        CREATE TABLE nodes_m005 (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            provider_id INTEGER REFERENCES providers(id),
            ssh_host TEXT NOT NULL,
            ssh_port INTEGER CHECK (ssh_port BETWEEN 1 AND 65535),
            ssh_user TEXT,
            ssh_key_path TEXT,
            ssh_jump TEXT,
            ssh_alias INTEGER NOT NULL DEFAULT 0,
            gpu_model TEXT NOT NULL DEFAULT '',
            gpu_count INTEGER NOT NULL DEFAULT 0 CHECK (gpu_count >= 0),
            vram_gib INTEGER CHECK (vram_gib > 0),
            interconnect TEXT NOT NULL DEFAULT 'unknown'
                CHECK (interconnect IN ('nvlink', 'pcie', 'unknown')),
            tags TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL DEFAULT 'active'
                CHECK (state IN ('active', 'offboarding', 'released')),
            local INTEGER NOT NULL DEFAULT 0,
            notes TEXT NOT NULL DEFAULT ''
        );
        INSERT INTO nodes_m005 (id, name, provider_id, ssh_host, ssh_port, ssh_user,
            ssh_key_path, ssh_jump, ssh_alias, gpu_model, gpu_count, vram_gib, interconnect,
            tags, state, local, notes)
        SELECT id, name, provider_id, ssh_host, ssh_port, ssh_user, ssh_key_path, ssh_jump,
            ssh_alias, gpu_model, gpu_count, vram_gib, interconnect, tags, state, local, notes
        FROM nodes;
        DROP TABLE nodes;
        ALTER TABLE nodes_m005 RENAME TO nodes;
        CREATE UNIQUE INDEX nodes_live_name ON nodes(name) WHERE state != 'released';
        CREATE INDEX nodes_name ON nodes(name);
        """,
    )
    broken = db.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise ValueError(f"m005: rows that refer to no node after the rebuild: {broken[:5]}")


@MIGRATIONS()
def m006_lease_terms(db: Database) -> None:
    """The lease terms that change the money maths (leases.money.billing) and the price of a
    storage line (a resource that bills until it is deleted). Defaults keep every existing
    lease billing as before: in full while stopped, calendar months, no refund known."""
    _run(
        db,
        """
        ALTER TABLE leases ADD COLUMN stopped_billing TEXT NOT NULL DEFAULT 'full'
            CHECK (stopped_billing IN ('full', 'storage_only', 'none'));
        ALTER TABLE leases ADD COLUMN month_count TEXT NOT NULL DEFAULT 'calendar'
            CHECK (month_count IN ('calendar', '30_days'));
        ALTER TABLE leases ADD COLUMN partial_unit TEXT
            CHECK (partial_unit IN ('second', 'minute', 'hour', 'day', 'whole'));
        ALTER TABLE leases ADD COLUMN renew_charge_days INTEGER CHECK (renew_charge_days >= 0);
        ALTER TABLE leases ADD COLUMN hourly_price TEXT;
        ALTER TABLE leases ADD COLUMN refund_rule TEXT NOT NULL DEFAULT '';
        ALTER TABLE resources ADD COLUMN price TEXT;
        ALTER TABLE resources ADD COLUMN price_per TEXT NOT NULL DEFAULT 'month'
            CHECK (price_per IN ('hour', 'day', 'month'));
        """,
    )


@MIGRATIONS()
def m007_gpu_owners(db: Database) -> None:
    """Busy card-minutes by the Unix user owning the GPU processes (leases.telemetry.attribution).

    gpu_owner_minute holds, for each node-minute with a busy card, a JSON object of owner
    to busy card-minutes (shares of a card split between users); it is purged with
    gpu_minute. gpu_owner_hour sums them per hour and is kept like gpu_hour."""
    _run(
        db,
        """
        CREATE TABLE gpu_owner_minute (
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            minute INTEGER NOT NULL,
            owners TEXT NOT NULL,
            PRIMARY KEY (node_id, minute)
        ) WITHOUT ROWID;
        CREATE TABLE gpu_owner_hour (
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            hour INTEGER NOT NULL,
            owner TEXT NOT NULL CHECK (length(owner) BETWEEN 1 AND 40),
            busy_card_minutes REAL NOT NULL CHECK (busy_card_minutes >= 0),
            PRIMARY KEY (node_id, hour, owner)
        ) WITHOUT ROWID;
        CREATE INDEX gpu_owner_hour_hour ON gpu_owner_hour(hour, node_id);
        """,
    )


@MIGRATIONS()
def m008_notify_queue(db: Database) -> None:
    # The notifier's outbox (leases/notify/send.py): what was sent (for dedupe and the rate
    # limit), what waits for the digest, what failed and waits for a retry. A target is a
    # hash of its URL: the URL holds a token, and no secret is stored in the ledger.
    _run(
        db,
        """
        CREATE TABLE notify_outbox (
            id INTEGER PRIMARY KEY,
            target TEXT NOT NULL,
            key TEXT NOT NULL,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
            state TEXT NOT NULL
                CHECK (state IN ('pending', 'digest', 'digested', 'sent', 'failed')),
            created_at TEXT NOT NULL,
            next_at TEXT NOT NULL,
            sent_at TEXT,
            attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            last_error TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX notify_outbox_due ON notify_outbox (state, next_at);
        CREATE INDEX notify_outbox_key ON notify_outbox (target, key, created_at);
        """,
    )


@MIGRATIONS()
def m009_alert_state(db: Database) -> None:
    """Alerts with a lifecycle (leases.alerts.state): keyed by kind, node id (names are
    reused after archive), lease id and key; first and last seen, cleared, acknowledged,
    snoozed. The m002 rows (host-key alerts by node name) are kept: each takes the id of
    the live node of its name, else the latest archived one."""
    _run(
        db,
        """
        CREATE TABLE alerts_m009 (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            node_id INTEGER REFERENCES nodes(id),
            node TEXT NOT NULL DEFAULT '',
            lease_id INTEGER REFERENCES leases(id),
            key TEXT NOT NULL DEFAULT '',
            severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
            message TEXT NOT NULL,
            action TEXT NOT NULL DEFAULT '',
            yuan TEXT,
            first_seen TEXT NOT NULL,
            last_seen TEXT NOT NULL,
            cleared_at TEXT,
            acked_at TEXT,
            acked_by TEXT,
            snoozed_until TEXT
        );
        INSERT INTO alerts_m009 (id, kind, node_id, node, severity, message, first_seen,
            last_seen, cleared_at)
        SELECT a.id, a.kind,
            (SELECT n.id FROM nodes n WHERE n.name = a.node
             ORDER BY n.state = 'released', n.id DESC LIMIT 1),
            coalesce(a.node, ''),
            CASE a.kind WHEN 'hostkey_changed' THEN 'critical' ELSE 'warning' END,
            a.message, a.at, coalesce(a.cleared_at, a.at), a.cleared_at
        FROM alerts a;
        DROP TABLE alerts;
        ALTER TABLE alerts_m009 RENAME TO alerts;
        CREATE INDEX alerts_identity ON alerts(kind, node_id, lease_id, key);
        CREATE INDEX alerts_open ON alerts(cleared_at);
        """,
    )


@MIGRATIONS()
def m010_audit_batch(db: Database) -> None:
    """The entries one command writes in one transaction share a batch (the id of its
    first entry), so that `zuka undo` takes back exactly one command. Entries written
    before have none: undo falls back to its older rule for them (leases.ledger.nodelog)."""
    db.execute("ALTER TABLE audit ADD COLUMN batch INTEGER")


@MIGRATIONS()
def m011_offboard(db: Database) -> None:
    """Offboarding (leases.offboard): each stored plan, the hash of its body (what the user
    saw and confirmed), and every step's state, so that a rerun continues where a killed
    run stopped. The evidence of each step is in the audit log (same hash chain); these
    rows only say where a run stands. No REFERENCES to nodes or leases: `node delete
    --force` of a node offboarded by mistake must not be blocked by its plans."""
    _run(
        db,
        """
        CREATE TABLE offboard_plans (
            id INTEGER PRIMARY KEY,
            node_id INTEGER NOT NULL,
            lease_id INTEGER,
            hash TEXT NOT NULL CHECK (length(hash) = 64),
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            superseded_by INTEGER REFERENCES offboard_plans(id),
            finished_at TEXT
        );
        CREATE INDEX offboard_plans_node ON offboard_plans(node_id, id);
        CREATE TABLE offboard_steps (
            plan_id INTEGER NOT NULL REFERENCES offboard_plans(id),
            key TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'started',
                'done', 'verified', 'failed', 'skipped', 'consent', 'consented')),
            updated_at TEXT,
            detail TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (plan_id, key)
        ) WITHOUT ROWID;
        """,
    )


@MIGRATIONS()
def m012_offboard_absent(db: Database) -> None:
    """A step may be `absent`: its target was never seen to exist, and the user says it
    never did (with a reason). SQLite cannot widen a CHECK in place: the table is made
    again with the rows it held."""
    _run(
        db,
        """
        CREATE TABLE offboard_steps_new (
            plan_id INTEGER NOT NULL REFERENCES offboard_plans(id),
            key TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'started',
                'done', 'verified', 'failed', 'skipped', 'consent', 'consented', 'absent')),
            updated_at TEXT,
            detail TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (plan_id, key)
        ) WITHOUT ROWID;
        INSERT INTO offboard_steps_new SELECT plan_id, key, seq, state, updated_at, detail
            FROM offboard_steps;
        DROP TABLE offboard_steps;
        ALTER TABLE offboard_steps_new RENAME TO offboard_steps;
        """,
    )


@MIGRATIONS()
def m013_lease_rounding(db: Database) -> None:
    """Where a lease's provider rounds to the fen (leases.core.models.ChargeRounding): every
    existing lease keeps today's figures, rounded on the bill."""
    _run(
        db,
        """
        ALTER TABLE leases ADD COLUMN rounding TEXT NOT NULL DEFAULT 'bill'
            CHECK (rounding IN ('bill', 'charge'));
        """,
    )


@MIGRATIONS()
def m014_stops(db: Database) -> None:
    """When a node was stopped (leases.ledger.stops): by node id and lease id, never by name
    (names are reused); `end` NULL while it is still stopped; `source` says who saw it,
    'hand' for `zuka lease stop`, else the cloud driver that read the instance's state;
    `who` the user (or the collector) that recorded it. At most one open stop a node.
    Billing applies them by the lease's stopped_billing (leases.money.billing)."""
    _run(
        db,
        """
        CREATE TABLE stops (
            id INTEGER PRIMARY KEY,
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            lease_id INTEGER NOT NULL REFERENCES leases(id),
            start TEXT NOT NULL,
            "end" TEXT,
            source TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 40),
            who TEXT NOT NULL DEFAULT '',
            CHECK ("end" IS NULL OR "end" > start)
        );
        CREATE INDEX stops_node ON stops(node_id, start);
        CREATE INDEX stops_lease ON stops(lease_id);
        CREATE UNIQUE INDEX stops_open ON stops(node_id) WHERE "end" IS NULL;
        """,
    )


@MIGRATIONS()
def m015_node_instance(db: Database) -> None:
    """The cloud instance a node is (leases.telemetry.cloudstate reads its state and records stops):
    its id, and the EC2-compatible endpoint it is read at ('' for the provider's default).
    Not a resource: offboarding never deletes it."""
    _run(
        db,
        """
        ALTER TABLE nodes ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE nodes ADD COLUMN instance_endpoint TEXT NOT NULL DEFAULT '';
        """,
    )


@MIGRATIONS()
def m016_alert_outbox(db: Database) -> None:
    """One owner of "new" (leases.alerts.state): each alert's change worth telling (new, or a
    higher severity) is written here in the transaction that stores the alert, by whichever
    process evaluated first; a notifier takes each row once (taken_at) and queues it in
    notify_outbox. The message and action are the ones of that change. An acknowledgement
    keeps the severity it was given at: a higher one shows the alert again."""
    _run(
        db,
        """
        CREATE TABLE alert_outbox (
            id INTEGER PRIMARY KEY,
            alert_id INTEGER NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
            change TEXT NOT NULL CHECK (change IN ('new', 'escalated')),
            severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
            message TEXT NOT NULL,
            action TEXT NOT NULL DEFAULT '',
            at TEXT NOT NULL,
            taken_at TEXT,
            UNIQUE (alert_id, change, severity, at)
        );
        CREATE INDEX alert_outbox_waiting ON alert_outbox (id) WHERE taken_at IS NULL;
        ALTER TABLE alerts ADD COLUMN acked_severity TEXT
            CHECK (acked_severity IN ('info', 'warning', 'critical'));
        UPDATE alerts SET acked_severity = severity WHERE acked_at IS NOT NULL;
        """,
    )


@MIGRATIONS()
def m017_accounts(db: Database) -> None:
    """What the accountant and the provider say (leases.ledger.books holds each table's rules):
    a lease's payment schedule; deposit refunds, partial or whole, each with its date;
    invoices (fapiao) on a provider's charges; a provider account's prepaid balance, as
    top-ups and as the provider's own figure read off its console; the provider's bills
    as imported, line by line; and the price book, the offers a lab collects. Amounts are
    decimal text, as in leases; days are YYYY-MM-DD, moments ISO 8601 with their offset.
    Their ids are never reused (AUTOINCREMENT): `zuka bill delete 4` then an import must not
    make another bill 4, which the user, the audit log and an undo would take for the first."""
    _run(
        db,
        """
        ALTER TABLE leases ADD COLUMN payment_schedule TEXT NOT NULL DEFAULT 'upfront'
            CHECK (payment_schedule IN ('upfront', 'monthly', 'quarterly'));
        CREATE TABLE deposit_refunds (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            lease_id INTEGER NOT NULL REFERENCES leases(id),
            amount TEXT NOT NULL,
            refunded_on TEXT NOT NULL,
            notes TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX deposit_refunds_lease ON deposit_refunds(lease_id);
        CREATE TABLE invoices (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            provider_id INTEGER NOT NULL REFERENCES providers(id),
            lease_id INTEGER REFERENCES leases(id),
            number TEXT NOT NULL CHECK (length(number) BETWEEN 1 AND 60),
            issued_on TEXT NOT NULL,
            period_start TEXT NOT NULL,
            period_end TEXT NOT NULL,
            amount TEXT NOT NULL,
            currency TEXT NOT NULL DEFAULT 'CNY',
            vat_rate TEXT NOT NULL,
            tax_included INTEGER NOT NULL DEFAULT 1 CHECK (tax_included IN (0, 1)),
            kind TEXT NOT NULL DEFAULT 'special' CHECK (kind IN ('special', 'ordinary', 'other')),
            notes TEXT NOT NULL DEFAULT '',
            CHECK (period_end > period_start),
            UNIQUE (provider_id, number)
        );
        CREATE INDEX invoices_lease ON invoices(lease_id);
        CREATE TABLE balance_entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            provider_id INTEGER NOT NULL REFERENCES providers(id),
            kind TEXT NOT NULL CHECK (kind IN ('topup', 'reading')),
            amount TEXT NOT NULL,
            currency TEXT NOT NULL DEFAULT 'CNY',
            at TEXT NOT NULL,
            notes TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX balance_entries_provider ON balance_entries(provider_id, at);
        CREATE TABLE bills (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            provider_id INTEGER NOT NULL REFERENCES providers(id),
            format TEXT NOT NULL CHECK (length(format) BETWEEN 1 AND 40),
            source TEXT NOT NULL DEFAULT '',
            sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
            imported_at TEXT NOT NULL,
            line_count INTEGER NOT NULL CHECK (line_count >= 0),
            lines_hash TEXT NOT NULL CHECK (length(lines_hash) = 64),
            UNIQUE (provider_id, sha256)
        );
        CREATE TABLE bill_lines (
            bill_id INTEGER NOT NULL REFERENCES bills(id) ON DELETE CASCADE,
            line_no INTEGER NOT NULL,
            period_start TEXT NOT NULL,
            period_end TEXT NOT NULL,
            resource_id TEXT NOT NULL DEFAULT '',
            product TEXT NOT NULL DEFAULT '',
            description TEXT NOT NULL DEFAULT '',
            region TEXT NOT NULL DEFAULT '',
            kind TEXT NOT NULL DEFAULT 'usage' CHECK (kind IN ('usage', 'subscription',
                'credit', 'discount', 'tax', 'refund', 'other')),
            amount TEXT NOT NULL,
            list_amount TEXT,
            currency TEXT NOT NULL DEFAULT 'CNY',
            PRIMARY KEY (bill_id, line_no)
        ) WITHOUT ROWID;
        CREATE INDEX bill_lines_resource ON bill_lines(resource_id, period_start);
        CREATE TABLE offers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            provider TEXT NOT NULL CHECK (length(provider) BETWEEN 1 AND 100),
            channel TEXT NOT NULL CHECK (channel IN ('cloud', 'platform', 'colo')),
            gpu_model TEXT NOT NULL CHECK (length(gpu_model) BETWEEN 1 AND 100),
            gpus INTEGER CHECK (gpus > 0),
            billing_type TEXT NOT NULL CHECK (billing_type IN
                ('per_second', 'hourly', 'card_hour', 'daily', 'weekly', 'monthly', 'contract')),
            unit_price TEXT NOT NULL,
            currency TEXT NOT NULL DEFAULT 'CNY',
            min_term INTEGER CHECK (min_term > 0),
            deposit TEXT,
            region TEXT NOT NULL DEFAULT '',
            quoted_on TEXT NOT NULL,
            valid_until TEXT,
            notes TEXT NOT NULL DEFAULT ''
        );
        """,
    )


@MIGRATIONS()
def m018_node_sold(db: Database) -> None:
    """What was sold of a node's interconnect beside its kind (acceptance checks it): the
    NVLinks between each pair of GPUs and the InfiniBand rate of a port in Gb/s (NULL: not
    said); and the port forwards its login command carried (leases.ssh.login.check_tunnel,
    a JSON list of `-L ...`, `-R ...`, `-D ...`: kept and shown, used by nothing)."""
    _run(
        db,
        """
        ALTER TABLE nodes ADD COLUMN nvlinks INTEGER CHECK (nvlinks BETWEEN 1 AND 64);
        ALTER TABLE nodes ADD COLUMN ib_gbps INTEGER CHECK (ib_gbps BETWEEN 1 AND 3200);
        ALTER TABLE nodes ADD COLUMN ssh_tunnels TEXT NOT NULL DEFAULT '[]';
        """,
    )


@MIGRATIONS()
def m019_acceptance(db: Database) -> None:
    """Hand-over acceptance (leases.ledger.acceptance_rows): one row per run of a node, with
    the lease it had then (NULL: none), the level, the verdict, its findings and the raw
    evidence (JSON), and the digest of all of it, which the run's entry on the audit chain
    holds too: a row changed outside zuka no longer matches it. Runs are never edited nor
    deleted (triggers refuse both, as for the audit log); no
    REFERENCES, so that a deleted node's runs stay (its name is kept with each run).
    The provider's return window (days after a lease starts during which it takes a node
    back; NULL: not known)."""
    _run(
        db,
        """
        CREATE TABLE acceptance_runs (
            id INTEGER PRIMARY KEY,
            node_id INTEGER NOT NULL,
            node TEXT NOT NULL,
            lease_id INTEGER,
            level TEXT NOT NULL CHECK (level IN ('quick', 'standard', 'burn')),
            status TEXT NOT NULL CHECK (status IN ('passed', 'warned', 'failed', 'skipped',
                'not_checked')),
            started TEXT NOT NULL,
            finished TEXT NOT NULL,
            results TEXT NOT NULL,
            evidence TEXT NOT NULL,
            digest TEXT NOT NULL CHECK (length(digest) = 64)
        );
        CREATE INDEX acceptance_runs_node ON acceptance_runs(node_id, id);
        ALTER TABLE providers ADD COLUMN return_days INTEGER CHECK (return_days >= 0);
        """,
    )
    from leases.ledger.auditchain import ACCEPTANCE_TRIGGERS

    for sql in ACCEPTANCE_TRIGGERS.values():
        db.execute(sql)


@MIGRATIONS()
def m020_node_host(db: Database) -> None:
    """A node's host figures (CPU, load, memory, disks with their labels, network: JSON of
    leases.core.host.HostStats) beside its latest GPU readings; '{}': not read."""
    _run(db, "ALTER TABLE node_latest ADD COLUMN host TEXT NOT NULL DEFAULT '{}';")


@MIGRATIONS()
def m021_node_source(db: Database) -> None:
    """Where a node's GPU readings come from (leases.core.promsource), on nodes and on
    providers (a node's own wins): NULL reading_source is the provider's, else SSH; prometheus reads
    PROM_URL's /api/v1/query for the dcgm-exporter series the matchers pick; a token is read
    from PROM_TOKEN_FILE, never kept here."""
    _run(
        db,
        """
        ALTER TABLE nodes ADD COLUMN reading_source TEXT
            CHECK (reading_source IN ('ssh', 'prometheus'));
        ALTER TABLE nodes ADD COLUMN prom_url TEXT NOT NULL DEFAULT '';
        ALTER TABLE nodes ADD COLUMN prom_match TEXT NOT NULL DEFAULT '';
        ALTER TABLE nodes ADD COLUMN prom_token_file TEXT NOT NULL DEFAULT '';
        ALTER TABLE providers ADD COLUMN reading_source TEXT
            CHECK (reading_source IN ('ssh', 'prometheus'));
        ALTER TABLE providers ADD COLUMN prom_url TEXT NOT NULL DEFAULT '';
        ALTER TABLE providers ADD COLUMN prom_match TEXT NOT NULL DEFAULT '';
        ALTER TABLE providers ADD COLUMN prom_token_file TEXT NOT NULL DEFAULT '';
        """,
    )


@MIGRATIONS()
def m022_node_probe(db: Database) -> None:
    """What a node's nvidia-smi was found to know (leases.telemetry.probecache): the query
    fields it accepted (a JSON list), the driver version that answered them and a digest of
    the login they were probed through. A cache: a poll starts from it instead of probing,
    and probes again when the driver or the login changes, or a reading does not parse.
    Read back as untrusted (a field zuka does not know makes the row ignored)."""
    _run(
        db,
        """
        CREATE TABLE node_probe (
            node_id INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
            fields TEXT NOT NULL,
            driver TEXT NOT NULL DEFAULT '',
            target TEXT NOT NULL DEFAULT '',
            at TEXT NOT NULL
        );
        """,
    )


@MIGRATIONS()
def m023_audit_origin(db: Database) -> None:
    """Where each audit entry's user came from (leases.core.origin): the SSH client address
    of their login, a service, a terminal; '' for entries written before (their hashes cover
    none) and where nothing is known. A new entry's hash covers it when not empty
    (leases.ledger.auditchain). ADD COLUMN keeps the append-only triggers as they are."""
    _run(db, "ALTER TABLE audit ADD COLUMN origin TEXT NOT NULL DEFAULT '';")
