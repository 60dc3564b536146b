"""zuka as a systemd service: the unit files (rendered by pure functions), where they go,
and how they are written. Orchestration (the lab, the ledger, systemctl) is in
leases.app.service."""
