"""Airflow triggers of regionflow."""
