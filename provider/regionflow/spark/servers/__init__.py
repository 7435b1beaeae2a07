"""Long-lived Spark servers: Spark Connect servers per host and standalone clusters."""
