"""Parsers of what the tools on a node print: pure, bounded, never raising on hostile text."""
