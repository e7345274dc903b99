"""The command line: `python -m engine` (`cli`), its shared helpers, the log views' commands
and the dashboard's start.
"""
