"""How requests travel: the retry and pacing policy (never re-sending a launch),
HTTP outcomes as errors, the rate limiter, bearer and refreshing token auth,
and redaction of credentials.
"""
