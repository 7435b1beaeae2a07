// The plugin API's JSON, as provider/regionflow/ui/{views,timeline,history,plan_view}.py write it.

export type Host = { name: string; slots: number; used: number; free: number; master: string; slot_profile: string };
export type Waiting = {
  bulk_id: string; dag_id: string; run_id: string; task_id: string; map_index: number; label: string;
  slots_requested: number; position: number; age_s: number; blocked_hosts: string[]; why: string;
};
export type Held = Waiting & { hosts: string[]; held_s: number };
export type Cluster = {
  generated_at: number;
  hosts: Host[];
  slots: { total: number; used: number; free: number };
  blocklist: { job_id: string; host: string; reason: string; expires_in_s: number }[];
  queue: Waiting[];
  queue_hidden: number;
  grants: { dag_id: string; run_id: string; grants: Held[] }[];
  schedulers: { scheduler_id: string; hostname: string; pid: number; heartbeat_age_s: number; state: string }[];
};

export type Series = [number, number][];
export type History = {
  since: number; until: number; hosts: { name: string; slots: number }[];
  occupancy: Record<string, Series>; queue: Series; grants: number;
};

export type Bar = {
  id: string; kind: "wait" | "attempt"; task_id: string; shard: number; label: string;
  host: string | null; slot: number | null; start: number; end: number | null; state: string;
  speculative: boolean; winner: boolean; original: string | null; attempt: string | null;
  try_number: number | null; input_bytes: number | null; slots: number; message: string | null;
};
export type Timeline = {
  dag_id: string; run_id: string; generated_at: number; run_state: string | null; active: boolean;
  rows: { host: string; slot: number }[];
  bars: Bar[];
  blocks: { host: string; start: number; end: number; reason: string }[];
};

export type Attempt = {
  shard: number; attempt: string; host: string; state: string; speculative: boolean; winner: boolean;
  started_at: number; ended_at: number | null; duration_s: number | null; message: string | null;
};
export type Copy = {
  request: number; shard: number; state: string; attempt: string | null; host: string | null;
  excluded_hosts: string[]; message: string | null;
};
export type RunAttempts = {
  dag_id: string; run_id: string; run_state: string | null; active: boolean;
  tasks: Record<string, { metrics: Record<string, number>; attempts: Attempt[]; copies: Copy[] }>;
  blocklist: { host: string; expires_in_s: number; reason: string }[];
};

export type PlanVertex = {
  name: string; parallelism: number; region: number; range: [number, number] | null; decided: number | null;
};
export type PlanDecision = { shards: number; input_bytes: number | null; reason: string };
export type PlanEdge = { src: string; dst: string; distribution: string; keys: string[]; exchange: string; declared: boolean };
export type PlanRegion = {
  index: number; task_id: string; column: number; vertices: string[]; execution_regions: number;
  slots_per_region: number; state?: string | null; shards?: Record<string, number>;
  started_at?: number | null; ended_at?: number | null; shards_waiting_for_slots?: number; shards_holding_slots?: number;
  decision?: PlanDecision | null;
};
export type PlanView = {
  dag_id: string; run_id: string | null; mode: string; dag_mode: string; preview: boolean; modes: string[];
  vertices: PlanVertex[]; edges: PlanEdge[]; regions: PlanRegion[]; region_count: number; min_slots: number;
  run_state: string | null; active: boolean;
};

/** What Airflow's UI passes a react_apps component (from its route). */
export type AirflowProps = { dagId?: string; runId?: string; taskId?: string; mapIndex?: string };
