"""Hand-over acceptance: proving a new node is what its lease says while it can still be
returned. `parse/` reads what the tools on the node print (pure), `checks/` judges it
against what was sold (pure), `probe.py` and `engine.py` run the commands through an
injected runner and keep the evidence; the use case is `leases.app.acceptance`.
"""
