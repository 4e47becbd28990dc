"""The load runs behind `scripts/load.py`, a module per kind of run; `harness` is what they share."""
