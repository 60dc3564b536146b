"""The acceptance check families: each module exposes `CHECK: Check` (leases.accept.engine)."""
