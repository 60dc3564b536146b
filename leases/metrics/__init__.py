"""`zuka collect --metrics-listen`: the fleet's gauges for Prometheus (see listen.py,
gauges.py, money.py and server.py)."""
