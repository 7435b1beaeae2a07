"""Airflow operators: vertex declarations (`SparkVertexOperator`) and region tasks (`RegionOperator`)."""
from .vertex import SparkVertexOperator, broadcast, forward, hash_by, rebalance, rescale, spark_vertex

__all__ = ["SparkVertexOperator", "spark_vertex", "forward", "rescale", "hash_by", "rebalance", "broadcast"]
