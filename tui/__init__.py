"""zuka's user interfaces: the `zuka` command line and the Textual dashboard.

Importing this package must stay cheap: textual is imported only by the dashboard modules.
"""
