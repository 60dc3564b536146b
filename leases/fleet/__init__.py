"""The read model the dashboard shows: everything one refresh reads of the fleet, one node's
facts, live status, the header, the filter, sparklines."""
