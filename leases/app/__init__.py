"""The application layer: every use case once (add/edit/end a lease, trust a node, plan and
run an offboarding, ack an alert...), with its result and its messages. The command line, the
dashboard and the web app call it; they only parse and show."""
