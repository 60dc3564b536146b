"""Money in Decimal: what a lease costs by billing period, which lease bills when, the month's
report and its formats, and what to rent next."""
