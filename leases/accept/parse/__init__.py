"""Parsers of what the tools on a node print: pure, never raising, naming what they could not read."""
