"""Lambda Cloud (cloud.lambda.ai), API v1."""
