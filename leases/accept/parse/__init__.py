"""Parsers of what a node's tools print: pure, never raising, naming what they missed."""
