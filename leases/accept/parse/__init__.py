"""Pure parsers of what a node's tools print (nvidia-smi's query CSV, `-q` text and `-q -x`
XML, ...) into the typed facts of `leases.accept.facts`. Every input is hostile: bounded in
size, never raising, and what could not be read is named in `problems`.
"""
