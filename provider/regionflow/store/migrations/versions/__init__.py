"""The store's revisions, oldest first: ``NNNN_<what>.py`` holds revision ``NNNN``, schema version N."""
