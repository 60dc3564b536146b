"""A provider's own bill, pure: its CSV export read into bill lines (one module per
published format, and `mapped` for any CSV through a column mapping), and the month's
reconciliation of those lines with zuka's charges (`reconcile`). No file, ledger or
config is read here: leases.app.bills reads them and stores the lines."""
