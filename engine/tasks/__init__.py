"""Durable tasks (the Tasks extension): a call whose body runs in the background, its record in
the store, answered for by any replica and run under a lease by one of them."""
