"""The Codex app-server client: transports, dispatcher, typed client, supervision, discovery.

Callers use ``AppServer`` (client.py) and ``DiscoveryCache``/``load_cached`` (discovery.py).
"""
