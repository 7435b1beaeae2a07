// Browse > regionflow slot pool: slot occupancy per host and the FIFO queue's length over the last
// hours (from the store's grant rows), the oldest waiting region and why, then the current tables.
import { Box, Button, HStack, Text } from "@chakra-ui/react";
import { useState } from "react";

import { usePolled } from "./api";
import { stateColor } from "./colors";
import { formatDuration, formatTime } from "./format";
import { Frame, Section } from "./Frame";
import { SortableTable } from "./SortableTable";
import { StepChart } from "./StepChart";
import type { Cluster, Held, History } from "./types";

const WINDOWS = [1, 3, 12, 24];

function Occupancy({ hours }: { hours: number }) {
  const history = usePolled<History>(`api/cluster/history?hours=${hours}`, 15000);
  if (history.error) return <Text color="fg.error">{history.error}</Text>;
  const data = history.data;
  if (!data) return <Text color="fg.muted">loading ...</Text>;
  const longest = Math.max(1, ...data.queue.map(([, v]) => v));
  return (
    <Box id="occupancy">
      {data.hosts.map((host) => (
        <StepChart
          key={host.name}
          name={`host:${host.name}`}
          label={`${host.name}: slots in use (of ${host.slots})`}
          series={data.occupancy[host.name] ?? []}
          since={data.since}
          until={data.until}
          max={host.slots}
          capacity={host.slots}
          color={stateColor("running")}
        />
      ))}
      <StepChart name="queue" label="regions waiting in the FIFO queue" series={data.queue} since={data.since}
                 until={data.until} max={longest} color={stateColor("queued")} />
    </Box>
  );
}

export function ClusterPage() {
  const [hours, setHours] = useState(3);
  const polled = usePolled<Cluster>("api/cluster");
  return (
    <Frame title="regionflow slot pool" subtitle="hosts, the FIFO queue of regions waiting for slots, the blocklist"
           polled={polled}>
      {(d) => {
        const oldest = d.queue[0];
        const held: (Held & { run: string })[] = d.grants.flatMap((g) => g.grants.map((x) => ({ ...x, run: g.run_id })));
        return (
          <>
            <Text id="summary" mb={2}>
              {`${d.slots.used} of ${d.slots.total} slots granted, ${d.slots.free} free; ${d.queue.length} region(s) waiting`}
              {d.queue_hidden ? ` (+${d.queue_hidden} of DAGs you cannot see)` : ""}
            </Text>
            <Text id="oldest" fontSize="sm" color={oldest ? "fg" : "fg.muted"}>
              {oldest
                ? `oldest waiting: ${oldest.dag_id} / ${oldest.label} for ${formatDuration(oldest.age_s)}: ${oldest.why}`
                : "no region is waiting for slots"}
            </Text>
            <Section title="Over time" id="history">
              <HStack mb={2} gap={1}>
                {WINDOWS.map((h) => (
                  <Button key={h} size="xs" variant={h === hours ? "solid" : "outline"} onClick={() => setHours(h)}
                          data-hours={h}>{`last ${h} h`}</Button>
                ))}
              </HStack>
              <Occupancy hours={hours} />
            </Section>
            <Section title="Hosts">
              <SortableTable id="hosts" rows={d.hosts} columns={[
                { title: "host", value: (h) => h.name }, { title: "slots", value: (h) => h.slots, numeric: true },
                { title: "used", value: (h) => h.used, numeric: true }, { title: "free", value: (h) => h.free, numeric: true },
                { title: "master", value: (h) => h.master }, { title: "slot profile", value: (h) => h.slot_profile }]} />
            </Section>
            <Section title="FIFO queue (oldest first)">
              <SortableTable id="queue" rows={d.queue} columns={[
                { title: "#", value: (q) => q.position, numeric: true }, { title: "DAG", value: (q) => q.dag_id },
                { title: "run", value: (q) => q.run_id }, { title: "region", value: (q) => q.label },
                { title: "shard", value: (q) => (q.map_index < 0 ? "" : q.map_index) },
                { title: "slots", value: (q) => q.slots_requested, numeric: true },
                { title: "waiting", value: (q) => q.age_s, render: (q) => formatDuration(q.age_s), numeric: true },
                { title: "why", value: (q) => q.why }]} />
            </Section>
            <Section title="Blocklist">
              <SortableTable id="blocklist" rows={d.blocklist} columns={[
                { title: "host", value: (b) => b.host }, { title: "run", value: (b) => b.job_id },
                { title: "reason", value: (b) => b.reason },
                { title: "expires in", value: (b) => b.expires_in_s, render: (b) => formatDuration(b.expires_in_s),
                  numeric: true }]} />
            </Section>
            <Section title="Regions holding slots">
              <SortableTable id="grants" rows={held} columns={[
                { title: "DAG", value: (g) => g.dag_id }, { title: "run", value: (g) => g.run },
                { title: "region", value: (g) => g.label }, { title: "slots", value: (g) => g.slots_requested, numeric: true },
                { title: "hosts", value: (g) => g.hosts.join(", ") },
                { title: "held for", value: (g) => g.held_s, render: (g) => formatDuration(g.held_s), numeric: true }]} />
            </Section>
            <Section title="Schedulers sharing the pool">
              <SortableTable id="schedulers" rows={d.schedulers} columns={[
                { title: "scheduler", value: (s) => s.scheduler_id }, { title: "host", value: (s) => s.hostname },
                { title: "pid", value: (s) => s.pid, numeric: true },
                { title: "last heartbeat", value: (s) => s.heartbeat_age_s,
                  render: (s) => `${formatDuration(s.heartbeat_age_s)} ago`, numeric: true },
                { title: "state", value: (s) => s.state }]} />
            </Section>
            <Text fontSize="xs" color="fg.muted" mt={3}>{`read ${formatTime(d.generated_at)}`}</Text>
          </>
        );
      }}
    </Frame>
  );
}
