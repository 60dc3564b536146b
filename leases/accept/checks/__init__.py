"""Check families: each module exposes `CHECK: Check`; pure judge functions beside its async run."""
