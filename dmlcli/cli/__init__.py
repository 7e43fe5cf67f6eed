"""The command line: a thin layer over the engine and the API.

app.py holds the group, its error handling and exit codes; options.py the option bundles (the
call's options, with one option per parameter of the operator table); commands.py the commands
that run or check calls (run, validate, dispatch, info); catalog.py the ones that show the table
(ops, describe). Each command's module is imported when the command is first looked up (app.COMMAND_MODULES),
so that a run imports commands.py and not the others.
"""

from .app import cli, main

__all__ = ["cli", "main"]
