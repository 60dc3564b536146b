"""Alerts: pure rules over each node's facts, the facts they read, their state in the ledger,
and the watch that evaluates them and tells people."""
