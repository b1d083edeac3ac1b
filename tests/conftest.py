"""Plugins for every tier: the end-of-run line naming what was skipped, and the required-tier check."""

pytest_plugins = ("tests.skip_summary",)
