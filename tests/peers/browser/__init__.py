"""Headless Chromium through chromedriver."""
