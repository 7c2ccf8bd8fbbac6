"""What a store adds to a call: single-use rounds, state by reference, the journal, and the
writes retried while the store is down; `services.StoreServices` holds one server's."""
