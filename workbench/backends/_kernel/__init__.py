"""The ``kernel`` backend: the real Linux MPTCP stack in network namespaces (see `backend`)."""
