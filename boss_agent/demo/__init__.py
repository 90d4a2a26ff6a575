"""The scripted and demo models: a Responses-API model on loopback for tests, demo and bench."""
