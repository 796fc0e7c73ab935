"""Real servers the test suite starts for itself (PostgreSQL in postgres.py)."""
