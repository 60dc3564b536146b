"""The check families of hand-over acceptance: each module exposes `CHECK: Check`, its pure
judge functions beside the async run that gathers the node's output through `ctx.probe`.
"""
