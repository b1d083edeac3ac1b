"""The demo: `python -m hack.demo` (`make demo`), on a real node where one can run (real.py)."""
