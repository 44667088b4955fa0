"""Transport security: TLS for every gRPC server and channel, and the certificates behind it."""
