"""The SQLite ledger: the schema and its migrations, the store of every entity, the hash-
chained audit log, undo, the check of rows against the chain, export and import."""
