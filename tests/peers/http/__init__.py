"""Real HTTP servers on loopback port 0: the local control plane and the Boss client."""
