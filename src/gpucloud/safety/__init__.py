"""What keeps spend in check: the launch journal, the cost ledger, monthly costs
and budget, deadlines and reaping, and reconcile after a crash.
"""
