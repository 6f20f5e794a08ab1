"""A whole cluster: `rdmadoctor fleet check` (every node's check, over ClusterShell's ssh or from saved facts,
grouped by verdict and cause, with the drift across nodes) and `rdmadoctor fleet probe` (pairwise probes through
the nodes' agents, scheduled so that no agent serves two at once, with failing pairs isolated to a node or a
link); the monitors' formats (`--format line|jsonl|prom`) and the HTML overview. See docs/fleet.md.

The front end's logic lives here; rdmadoctor/cli.py only parses arguments and prints.
"""
