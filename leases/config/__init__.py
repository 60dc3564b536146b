"""The config: TOML files of thresholds, notification URLs, currency and time zone, laid
over each other (the system config, its secrets file, the user's own; layers).

sections: the typed config (one dataclass a section, with its defaults); keys: every
setting's key, parser and environment variable; mappings: the sections of the user's own
names ([users], [projects], [keys]) and [money] rates; layers: the files in order, each
read and checked; load: where the user's file is, and laying the files and the
environment key by key.
"""
