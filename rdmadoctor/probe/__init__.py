"""`check --peer`: the probe ladder (run.py), its view for the rules (view.py) and its rungs (ladder.py).

The verbs work runs in verbs_child.py, a child process killed at each phase's deadline (child.py)."""
