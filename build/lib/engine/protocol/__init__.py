"""JSON-RPC framing and the protocol eras, independent of any transport."""
