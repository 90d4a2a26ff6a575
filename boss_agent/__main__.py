"""`python -m boss_agent` is the same as the `boss-agent` console script."""

from boss_agent.cli.entry import main

main()
