"""`zuka web`: the dashboard in a browser tab, and who may open it."""
