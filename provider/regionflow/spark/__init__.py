"""The Spark runtime layer: the region program run by spark-submit, partition storage, input
descriptors and submission arguments. Modules here import PySpark lazily, inside functions.
"""
