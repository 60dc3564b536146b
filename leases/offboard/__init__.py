"""Offboarding: a verified, resumable checklist that deletes only what the ledger says
belongs to a lease (issue 10). steps.py holds the shapes every part shares."""
