"""The dashboard's screens, one a file."""
