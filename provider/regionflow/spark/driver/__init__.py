"""The region program as it runs inside a Spark driver (imports PySpark lazily)."""
