"""Xvfb with a window manager and the CUA driver."""
