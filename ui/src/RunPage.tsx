// A DAG run's regionflow tab (and, for one task, the task instance's): the run's timeline, then its
// attempts, speculative copies, speculation figures and blocklist. Refreshes while the run is active.
import { Text } from "@chakra-ui/react";

import { seg, usePolled } from "./api";
import { formatDuration, formatNumber, formatTime } from "./format";
import { Frame, Section } from "./Frame";
import { RunTimeline } from "./RunTimeline";
import { SortableTable } from "./SortableTable";
import type { AirflowProps, Attempt, Copy, RunAttempts, Timeline } from "./types";

const stillActive = (d: { active: boolean }) => d.active;

function AttemptTables({ dagId, runId, taskId }: { dagId: string; runId: string; taskId?: string }) {
  const query = taskId ? `?task_id=${seg(taskId)}` : "";
  const polled = usePolled<RunAttempts>(`api/dags/${seg(dagId)}/runs/${seg(runId)}/attempts${query}`, 5000, stillActive);
  if (!polled.data) return <Text color="fg.muted" fontSize="sm">{polled.error ?? "loading ..."}</Text>;
  const tasks = Object.entries(polled.data.tasks);
  const attempts: (Attempt & { task: string })[] = tasks.flatMap(([task, t]) => t.attempts.map((a) => ({ ...a, task })));
  const copies: (Copy & { task: string })[] = tasks.flatMap(([task, t]) => t.copies.map((c) => ({ ...c, task })));
  const figures = tasks.flatMap(([task, t]) => Object.entries(t.metrics).map(([name, value]) => ({ task, name, value })));
  return (
    <>
      <Section title="Attempts">
        <SortableTable id="attempts" rows={attempts} columns={[
          { title: "task", value: (a) => a.task }, { title: "shard", value: (a) => a.shard, numeric: true },
          { title: "attempt", value: (a) => a.attempt }, { title: "host", value: (a) => a.host },
          { title: "start", value: (a) => a.started_at, render: (a) => formatTime(a.started_at) },
          { title: "end", value: (a) => a.ended_at, render: (a) => formatTime(a.ended_at) },
          { title: "duration", value: (a) => a.duration_s, render: (a) => formatDuration(a.duration_s), numeric: true },
          { title: "state", value: (a) => a.state },
          { title: "copy", value: (a) => (a.speculative ? "speculative" : "") },
          { title: "winner", value: (a) => (a.winner ? "winner" : "") },
          { title: "message", value: (a) => a.message }]} />
      </Section>
      <Section title="Speculative copies">
        <SortableTable id="copies" rows={copies} columns={[
          { title: "task", value: (c) => c.task }, { title: "shard", value: (c) => c.shard, numeric: true },
          { title: "request", value: (c) => c.request, numeric: true }, { title: "state", value: (c) => c.state },
          { title: "attempt", value: (c) => c.attempt }, { title: "host", value: (c) => c.host },
          { title: "avoiding", value: (c) => c.excluded_hosts.join(", ") }, { title: "message", value: (c) => c.message }]} />
      </Section>
      <Section title="Speculation figures">
        <SortableTable id="figures" rows={figures} columns={[
          { title: "task", value: (f) => f.task }, { title: "figure", value: (f) => f.name },
          { title: "value", value: (f) => f.value, render: (f) => formatNumber(f.value), numeric: true }]} />
      </Section>
      <Section title="Blocklist of the run">
        <SortableTable id="blocklist" rows={polled.data.blocklist} columns={[
          { title: "host", value: (b) => b.host }, { title: "reason", value: (b) => b.reason },
          { title: "expires in", value: (b) => b.expires_in_s, render: (b) => formatDuration(b.expires_in_s),
            numeric: true }]} />
      </Section>
    </>
  );
}

export function RunPage({ dagId, runId, taskId }: AirflowProps) {
  const path = dagId && runId ? `api/dags/${seg(dagId)}/runs/${seg(runId)}/timeline` : null;
  const polled = usePolled<Timeline>(path, 5000, stillActive);
  if (!dagId || !runId) return <Text>open this page from a DAG run</Text>;
  return (
    <Frame
      title={taskId ? "regionflow attempts" : "regionflow timeline"}
      subtitle={`DAG ${dagId}, run ${runId}${taskId ? `, task ${taskId} (every shard)` : ""}`}
      polled={polled}
      stoppedText={(d) => (d.run_state ? `run ${d.run_state}: not refreshing` : "no run: not refreshing")}
    >
      {(d) => (
        <>
          <Section title={taskId ? "Timeline of the task" : "Timeline of the run"}>
            <RunTimeline data={d} taskId={taskId} />
          </Section>
          <AttemptTables dagId={dagId} runId={runId} taskId={taskId} />
        </>
      )}
    </Frame>
  );
}
