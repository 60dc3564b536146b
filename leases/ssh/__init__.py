"""SSH to the nodes: the login command a platform hands out, ~/.ssh/config, host key trust, and
the kept-open sessions (asyncssh)."""
