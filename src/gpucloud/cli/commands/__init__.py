"""The command modules: each registers its commands on the app (cli/registry.py
maps a command to its module).
"""
