"""One test suite run against every implementation of a role (the two task sources)."""
