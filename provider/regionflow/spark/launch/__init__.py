"""How a unit attempt becomes a Spark application, is watched, and ends."""
