"""regionflow in the Airflow UI: a plugin (`plugin.RegionflowPlugin`, registered through the
``airflow.plugins`` entry point) whose FastAPI app (`app.build_app`) serves JSON views of the store
(`views`) and small pages for them behind Airflow's auth manager."""
