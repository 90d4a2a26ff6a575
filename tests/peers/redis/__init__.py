"""A real redis-server per test."""
