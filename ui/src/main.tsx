// regionflow's pages for Airflow's UI. Airflow loads this bundle for each of the plugin's
// `react_apps` (provider/regionflow/ui/plugin.py) and renders `globalThis[<app name>]` with the route's
// dagId, runId, taskId and mapIndex; one bundle serves every app, so it registers each name itself.
import { ClusterPage } from "./ClusterPage";
import { PlanPage } from "./PlanPage";
import { RunPage } from "./RunPage";
import type { AirflowProps } from "./types";

const APPS: Record<string, (props: AirflowProps) => unknown> = {
  "regionflow slot pool": ClusterPage,
  "regionflow plan": PlanPage,
  "regionflow run plan": PlanPage,
  "regionflow timeline": RunPage,
  "regionflow attempts": RunPage,
};

for (const [name, page] of Object.entries(APPS)) Reflect.set(globalThis, name, page);

export default ClusterPage;
