"""Pure unit tests: no process, no socket, no event loop where it can be helped."""
