"""The user's config: a TOML file of thresholds, notification URLs, currency and time zone.

sections: the typed config (one dataclass a section, with its defaults); keys: every
setting's key, parser and environment variable; mappings: the sections of the user's own
names ([users], [projects], [keys]) and [money] rates; load: where the file is, reading it
safely and merging it with the environment.
"""
