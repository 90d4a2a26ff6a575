"""The command line: thin typer commands, their renderers and the service commands."""
