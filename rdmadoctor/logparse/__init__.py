"""Logs in, Runs out: perftest's (lines.py, runs.py) and every other producer's (producers.py), from one pass
over each input. Knows what the tools print, nothing about causes.

Each line is classified once (lines.py: perftest's structure, and every catalogue's messages); a message goes
to the run of the producer whose catalogue it is in; a library's or the kernel's message joins the run that is
open; the settings a paste shows apply to the runs of its input.

The entry points are in streams.py: parse_streams, parse_paths and parse_text. Importing the package
loads none of its modules, so a command that needs only the catalogues (check) does not load the parser.
"""
