"""The Alembic environment of regionflow's store: `env.py` and one revision per schema version in `versions/`
(revision ``0002`` is schema version 2, ...). `regionflow.store.migrate` runs it; nothing here is imported
by the store itself."""
