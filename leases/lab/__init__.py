"""A lab install: one ledger folder shared by a lab on one jump host, who may do what in it
(roles by Unix groups, enforced by the files' owners, modes and ACLs), and how it is made."""
