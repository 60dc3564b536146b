"""Offboarding: a verified, resumable checklist that deletes only what the ledger says
belongs to a lease (issue 10).

steps      the shapes every part shares (Step, Outcome, Driver, Planner, PlanInput)
plan       the plan from the ledger's facts, and its hash
preflight  lease facts; who each cloud driver acts as, against the ledger and blocklist
manual     console steps a person does, then verified
release    the ledger's part: lease ended, deposit refund pending, node released
remoteplan the node's steps over SSH
remote     their driver ("ssh"); nodescripts, the scripts it sends; nodeoutput, what
           the node printed, read
evidence   stored plans, step states, and the evidence on the audit chain
runner     execute (resumable, one run at a time), skip, never existed
readback   inspect (look before you leap) and recheck: read only
report     the reviewer's report, Markdown or JSON
wiring     the default planners and drivers of `zuka offboard`
"""
