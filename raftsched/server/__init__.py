"""The server: the composition root of a node (:mod:`raftsched.server.node`) and the wiring of its
replicated core that the simulation shares (:mod:`raftsched.server.core`)."""
