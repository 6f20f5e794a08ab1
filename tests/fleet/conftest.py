from tests.fleet.helpers import facts_dir, probe_results  # noqa: F401 - the fixtures of every fleet test
