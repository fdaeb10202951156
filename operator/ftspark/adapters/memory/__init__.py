"""In-memory adapters: fast, thread-safe fakes for unit tests with the same semantics."""
