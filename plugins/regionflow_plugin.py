"""regionflow's Airflow UI plugin for installations that deploy plugins by copying files into
``$AIRFLOW_HOME/plugins``. With regionflow pip-installed, its ``airflow.plugins`` entry point
already registers the same plugin, and Airflow skips this copy as "already registered"."""
from regionflow.ui.plugin import RegionflowPlugin

__all__ = ["RegionflowPlugin"]
