"""The unit-run service: how one unit (a shard of a logical region's execution regions) is opened, waits
for its inputs, is placed on its grant, runs as one attempt and settles, for every runner: the
RegionOperator (one Airflow task per unit), the executor's speculative copies, the speculation sensor's
copy templates and `regionflow run`. No Airflow import anywhere in this package.

Modules (imported by name, so a process takes only what it uses: the triggerer only `readiness`):
`dags` (a DAG's job), `readiness` (what a shard waits for), `tasks` (a unit task at a grant), `opened`
(`OpenedUnit`), `attempts` (an attempt on the configured backend), `service` (`UnitRunService`: place,
run, settle).
"""
