"""The Textual dashboard's shell: the app, its commands and key map, the ledger worker thread,
garbage collection policy, and its stylesheet."""
