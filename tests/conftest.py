"""Plugins for every tier: the end-of-run time, skip and figure summaries, the required-tier check, and the
scheduling of `make test`'s side-by-side run (tests/tier_scheduling.py)."""

pytest_plugins = ("tests.skip_summary", "tests.run_figures", "tests.tier_scheduling")
