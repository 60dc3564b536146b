"""Notifications: where a URL may point, each URL's kind and masked form, and the rendering,
sending and outbox of a message."""
