"""The cloud part of offboarding: the plan's cloud steps, credentials, ids, and the drivers
(S3, EC2, a cloud's own command-line tool)."""
