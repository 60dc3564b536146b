"""The `zuka` command line: the parser, one module of handlers per command group, human tables
and JSON."""
