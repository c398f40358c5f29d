"""The command line: the shared flag conventions (``args``) and every ``es-*`` program.
Nothing else in ``es`` imports this package."""
