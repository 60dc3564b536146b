"""zuka's domain: the lease ledger, GPU readings, billing and offboarding, with no UI."""

__version__ = "0.1.0"
