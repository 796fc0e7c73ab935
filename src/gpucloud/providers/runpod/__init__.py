"""RunPod (runpod.io), REST API v2."""
