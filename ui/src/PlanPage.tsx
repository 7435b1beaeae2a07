// A DAG's regionflow plan (its tab, and a DAG run's): the logical graph laid out left to right with
// the regions as boxes, blocking edges dashed, parallelism on the vertices and slots on the regions,
// a switch to preview another exchange mode; with a run, each region's state. Graphs beyond
// DRAW_LIMIT vertices are summarized per region instead of drawn.
import { Badge, Box, HStack, NativeSelect, Text } from "@chakra-ui/react";
import { useMemo, useState } from "react";

import { seg, usePolled } from "./api";
import { INK, MUTED_INK, PANEL, SUBTLE, stateColor } from "./colors";
import { formatBytes, formatTime } from "./format";
import { Frame, Section } from "./Frame";
import { layOut, NODE_H, parallelismText, REGION_HEAD, regionHead, type Point } from "./layout";
import { SortableTable } from "./SortableTable";
import type { AirflowProps, PlanRegion, PlanView } from "./types";

export const DRAW_LIMIT = 80;

const path = (points: Point[]) =>
  points.map((p, i) => `${i === 0 ? "M" : "L"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");

function regionTitle(r: PlanRegion): string {
  let text = `region ${r.index}: task ${r.task_id}, ${r.execution_regions} execution region(s) of ${r.slots_per_region} slot(s)`;
  if (r.state !== undefined) text += `; ${r.state ?? "not started"}`;
  if (r.shards_waiting_for_slots) text += `; ${r.shards_waiting_for_slots} shard(s) waiting for slots`;
  if (r.decision) text += `; decided for this run: ${r.decision.reason}`;
  return text;
}

function Drawing({ view }: { view: PlanView }) {
  const layout = useMemo(() => layOut(view), [view]);
  return (
    <Box id="drawing" overflow="auto" borderWidth="1px" borderRadius="md" maxH="75vh" bg={PANEL}>
      <svg width={layout.width} height={layout.height} data-vertices={view.vertices.length}>
        <defs>
          <marker id="rf-plan-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
            <path d="M0,0 L10,5 L0,10 z" fill={INK} />
          </marker>
        </defs>
        {view.regions.map((r) => {
          const b = layout.regions.get(r.index)!;
          const stroke = r.state === undefined || r.state === null ? MUTED_INK : stateColor(r.state);
          return (
            <g key={r.index} className="region" data-region={r.index} data-task={r.task_id} data-state={r.state ?? ""}>
              <rect x={b.x} y={b.y} width={b.width} height={b.height} rx={8} fill={SUBTLE} stroke={stroke}
                    strokeWidth={2} />
              <text className="region-head" x={b.x + 8} y={b.y + REGION_HEAD - 6} style={{ fontSize: 11 }} fill={INK}>
                {regionHead(r)}
              </text>
              <title>{regionTitle(r)}</title>
            </g>
          );
        })}
        {layout.edges.map(({ edge, points }, i) => {
          const middle = points[Math.floor(points.length / 2)];
          return (
            <g key={i} className="edge" data-src={edge.src} data-dst={edge.dst} data-exchange={edge.exchange}>
              <path d={path(points)} fill="none" stroke={INK} strokeWidth={1.4} markerEnd="url(#rf-plan-arrow)"
                    strokeDasharray={edge.exchange === "blocking" ? "6 4" : undefined} />
              <text x={middle.x} y={middle.y - 4} style={{ fontSize: 10 }} textAnchor="middle" fill={MUTED_INK}>
                {edge.distribution.toLowerCase()}
              </text>
            </g>
          );
        })}
        {view.vertices.map((v) => {
          const b = layout.vertices.get(v.name)!;
          return (
            <g key={v.name} className="vertex" data-vertex={v.name} data-region={v.region}>
              <rect x={b.x} y={b.y} width={b.width} height={NODE_H} rx={5} fill={PANEL}
                    stroke={stateColor("running")} strokeWidth={1.4} />
              <text x={b.x + b.width / 2} y={b.y + 17} style={{ fontSize: 12 }} textAnchor="middle" fill={INK}>{v.name}</text>
              <text x={b.x + b.width / 2} y={b.y + 32} style={{ fontSize: 10 }} textAnchor="middle" fill={MUTED_INK}>
                {parallelismText(v)}
              </text>
              {v.range === null ? null : (
                <title>{`${v.name}: adaptive, range ${v.range[0]}-${v.range[1]}, planned ${v.parallelism}` +
                        (v.decided === null ? "" : `, decided ${v.decided} for this run`)}</title>
              )}
            </g>
          );
        })}
      </svg>
    </Box>
  );
}

function Summary({ view }: { view: PlanView }) {
  const parallelism = new Map(view.vertices.map((v) => [v.name, v.parallelism]));
  const rows = view.regions.map((r) => ({ ...r, subtasks: r.vertices.reduce((n, v) => n + (parallelism.get(v) ?? 0), 0) }));
  return (
    <Box id="drawing-summary">
      <Text mb={2} fontSize="sm">
        {`${view.vertices.length} vertices are more than ${DRAW_LIMIT} to draw: the regions are summarized below`}
      </Text>
      <SortableTable id="region-summary" rows={rows} columns={[
        { title: "region", value: (r) => r.index, numeric: true }, { title: "task", value: (r) => r.task_id },
        { title: "vertices", value: (r) => r.vertices.length, numeric: true },
        { title: "subtasks", value: (r) => r.subtasks, numeric: true },
        { title: "slots each", value: (r) => r.slots_per_region, numeric: true },
        { title: "state", value: (r) => (r.state === undefined ? "" : r.state ?? "not started") }]} />
    </Box>
  );
}

export function PlanPage({ dagId, runId }: AirflowProps) {
  const [mode, setMode] = useState<string | null>(null);
  const query = [runId ? `run_id=${seg(runId)}` : "", mode ? `mode=${seg(mode)}` : ""].filter(Boolean).join("&");
  const polled = usePolled<PlanView>(dagId ? `api/dags/${seg(dagId)}/plan${query ? `?${query}` : ""}` : null, 5000,
                                     (d) => d.active);
  if (!dagId) return <Text>open this page from a DAG</Text>;
  return (
    <Frame title="regionflow plan" subtitle={`DAG ${dagId}${runId ? `, run ${runId}` : ""}`} polled={polled}
           stoppedText={(d) => (d.run_id ? `run ${d.run_state}: not refreshing` : "no run: not refreshing")}>
      {(d) => (
        <>
          <HStack gap={3} mb={2} wrap="wrap">
            <Text fontSize="sm">exchange mode</Text>
            <NativeSelect.Root size="sm" width="16rem">
              <NativeSelect.Field id="mode" value={d.mode} onChange={(e) => setMode(e.currentTarget.value)}>
                {d.modes.map((m) => <option key={m} value={m}>{m + (m === d.dag_mode ? " (the DAG's)" : "")}</option>)}
              </NativeSelect.Field>
              <NativeSelect.Indicator />
            </NativeSelect.Root>
            {d.preview ? <Badge colorPalette="orange">preview</Badge> : null}
            <Text fontSize="xs" color="fg.muted">solid arrow: pipelined · dashed: blocking</Text>
          </HStack>
          <Text id="summary" mb={2}>
            {`${d.region_count} pipelined region(s) in ${d.regions.length} logical region(s) under ${d.mode}; `}
            {`at least ${d.min_slots} slot(s)`}
            {d.preview ? ` · preview: the DAG runs under ${d.dag_mode}, so no region states are shown` : ""}
            {d.run_id ? ` · run ${d.run_id}: ${d.run_state}` : ""}
          </Text>
          {d.vertices.length > DRAW_LIMIT ? <Summary view={d} /> : <Drawing view={d} />}
          <Section title="Edges">
            <SortableTable id="edges" rows={d.edges} columns={[
              { title: "from", value: (e) => e.src }, { title: "to", value: (e) => e.dst },
              { title: "distribution", value: (e) => e.distribution }, { title: "keys", value: (e) => e.keys.join(", ") },
              { title: "exchange", value: (e) => e.exchange + (e.declared ? " (declared)" : "") }]} />
          </Section>
          <Section title="Regions">
            <SortableTable id="regions" rows={d.regions} columns={[
              { title: "region", value: (r) => r.index, numeric: true }, { title: "task", value: (r) => r.task_id },
              { title: "vertices", value: (r) => r.vertices.join(", ") },
              { title: "execution regions", value: (r) => r.execution_regions, numeric: true },
              { title: "slots each", value: (r) => r.slots_per_region, numeric: true },
              { title: "state", value: (r) => (r.state === undefined ? "(preview)" : r.state ?? "not started") },
              { title: "decided for the run", value: (r) => r.decision?.shards ?? null,
                render: (r) => (r.decision ? `${r.decision.shards} shard(s), ${formatBytes(r.decision.input_bytes)} read` : "") },
              { title: "start", value: (r) => r.started_at ?? null, render: (r) => formatTime(r.started_at) },
              { title: "end", value: (r) => r.ended_at ?? null, render: (r) => formatTime(r.ended_at) }]} />
          </Section>
        </>
      )}
    </Frame>
  );
}

