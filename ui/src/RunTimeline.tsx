// The timeline of one DAG run (a Gantt chart): a row per host and slot; per region task shard its
// wait for slots (hatched, before each attempt) and its attempts on the slots their grant held,
// coloured by state; speculative copies outlined and linked to the attempt they copy, the loser's
// end crossed; the run's blocklist intervals across the host's rows. Zoom with the buttons; hover
// a bar for its times, slots and bytes.
import { Box, Button, Grid, HStack, Text } from "@chakra-ui/react";
import { useMemo, useState } from "react";

import { TimeAxis, timeScale } from "./axis";
import { DANGER, INK, MUTED_INK, RULE, stateColor } from "./colors";
import { formatBytes, formatDuration, formatTime } from "./format";
import type { Bar, Timeline } from "./types";
import { useWidth } from "./useWidth";

const LABEL_W = 150;
const ROW_H = 24;
const TOP = 8;
const AXIS_H = 22;
const ZOOMS = [1, 2, 4, 8, 16, 32];
const ENDED_BY_OTHERS = new Set(["killed", "lost_commit"]);

type Row = { key: string; host: string | null; slot: number | null; label: string };

const rowKey = (host: string | null, slot: number | null) => (host === null ? "queue" : `${host}/${slot ?? "-"}`);

function rowsOf(data: Timeline, bars: Bar[]): Row[] {
  const rows: Row[] = data.rows.map((r) => ({ key: rowKey(r.host, r.slot), host: r.host, slot: r.slot,
                                               label: `${r.host} · slot ${r.slot}` }));
  const known = new Set(rows.map((r) => r.key));
  for (const bar of bars) {
    const key = rowKey(bar.host, bar.slot);
    if (!known.has(key)) {
      known.add(key);
      rows.push({ key, host: bar.host, slot: bar.slot,
                  label: bar.host === null ? "waiting (no slot yet)" : `${bar.host}${bar.slot === null ? "" : ` · slot ${bar.slot}`}` });
    }
  }
  return rows;
}

export function RunTimeline({ data, taskId }: { data: Timeline; taskId?: string }) {
  const [zoom, setZoom] = useState(1);
  const [hovered, setHovered] = useState<Bar | null>(null);
  const [frame, frameWidth] = useWidth<HTMLDivElement>();
  const bars = useMemo(() => data.bars.filter((b) => !taskId || b.task_id === taskId), [data, taskId]);
  const rows = useMemo(() => rowsOf(data, bars), [data, bars]);
  if (!bars.length) {
    return <Text id="timeline" ref={frame} color="fg.muted" fontSize="sm">nothing ran or waited for slots yet</Text>;
  }
  const now = data.generated_at;
  const from = Math.min(...bars.map((b) => b.start));
  const to = Math.max(from + 1, ...bars.map((b) => b.end ?? now));
  const width = Math.max(320, frameWidth - LABEL_W - 4) * zoom;
  const scale = timeScale(from, to, 4, width - 8);
  const yOf = new Map(rows.map((r, i) => [r.key, TOP + i * ROW_H]));
  const height = TOP + rows.length * ROW_H + AXIS_H;
  const firstBarOf = new Map<string, Bar>();
  for (const bar of bars) if (bar.kind === "attempt" && bar.attempt && !firstBarOf.has(bar.attempt)) firstBarOf.set(bar.attempt, bar);

  return (
    <Box id="timeline" ref={frame}>
      <HStack gap={1} mb={2}>
        <Text fontSize="sm" mr={2}>zoom</Text>
        {ZOOMS.map((z) => (
          <Button key={z} size="xs" variant={z === zoom ? "solid" : "outline"} onClick={() => setZoom(z)} data-zoom={z}>
            {`${z}x`}
          </Button>
        ))}
        <Text fontSize="xs" color="fg.muted" ml={3}>
          hatched: waiting for slots · outlined: speculative copy · ✕: ended by the winner · red band: blocklisted
        </Text>
      </HStack>
      <Grid templateColumns={`${LABEL_W}px 1fr`} borderWidth="1px" borderRadius="md">
        <svg width={LABEL_W} height={height}>
          {rows.map((r) => (
            <text key={r.key} x={8} y={(yOf.get(r.key) ?? 0) + ROW_H / 2 + 4} style={{ fontSize: 11 }} fill={INK}
                  data-row={r.key}>{r.label}</text>
          ))}
        </svg>
        <Box overflowX="auto">
          <svg width={width} height={height} data-zoom={zoom}>
            <defs>
              <pattern id="rf-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                <rect width="6" height="6" fill={stateColor("queued", "muted")} />
                <line x1="0" y1="0" x2="0" y2="6" stroke={stateColor("queued")} strokeWidth="2" />
              </pattern>
              <marker id="rf-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto">
                <path d="M0,0 L10,5 L0,10 z" fill={INK} />
              </marker>
            </defs>
            {rows.map((r, i) => (
              <line key={r.key} x1={0} x2={width} y1={TOP + (i + 1) * ROW_H} y2={TOP + (i + 1) * ROW_H} stroke={RULE}
                    strokeWidth={0.5} />
            ))}
            <TimeAxis scale={scale} y={TOP + rows.length * ROW_H} height={rows.length * ROW_H} />
            {data.blocks.flatMap((block, index) =>
              rows.filter((r) => r.host === block.host).map((r) => {
                const x1 = scale.x(Math.max(block.start, from));
                const x2 = scale.x(Math.min(block.end, to));
                return x2 <= x1 ? null : (
                  <rect key={`${index}:${r.key}`} className="block" data-host={block.host} data-from={block.start}
                        data-to={block.end} x={x1} width={x2 - x1} y={yOf.get(r.key)} height={ROW_H} fill={DANGER}
                        fillOpacity={0.15}>
                    <title>{`blocklisted ${formatTime(block.start)} - ${formatTime(block.end)}: ${block.reason}`}</title>
                  </rect>
                );
              }))}
            {bars.map((bar) => {
              const y = yOf.get(rowKey(bar.host, bar.slot)) ?? 0;
              const x1 = scale.x(bar.start);
              const w = Math.max(scale.x(bar.end ?? now) - x1, 2);
              const wait = bar.kind === "wait";
              return (
                <g key={bar.id} className={`bar bar-${bar.kind}`} data-id={bar.id} data-kind={bar.kind}
                   data-task={bar.task_id} data-shard={bar.shard} data-attempt={bar.attempt ?? ""}
                   data-host={bar.host ?? ""} data-slot={bar.slot ?? ""} data-state={bar.state}
                   data-speculative={bar.speculative} data-winner={bar.winner} data-original={bar.original ?? ""}
                   data-start={bar.start} data-end={bar.end ?? ""}
                   onMouseEnter={() => setHovered(bar)} style={{ cursor: "default" }}>
                  <rect x={x1} width={w} y={wait ? y + ROW_H / 2 - 4 : y + 3} height={wait ? 8 : ROW_H - 6} rx={2}
                        fill={wait ? "url(#rf-hatch)" : stateColor(bar.state)}
                        stroke={bar.speculative ? INK : wait ? stateColor("queued") : "none"}
                        strokeWidth={bar.speculative ? 1.5 : 0.6} strokeDasharray={bar.speculative ? "4 2" : undefined} />
                  {!wait && w > 70 ? (
                    <text x={x1 + 4} y={y + ROW_H / 2 + 4} style={{ fontSize: 10 }} fill="white" pointerEvents="none">
                      {`${bar.task_id}[${bar.shard}]${bar.winner ? " ★" : ""}`}
                    </text>
                  ) : null}
                  {!wait && bar.end !== null && ENDED_BY_OTHERS.has(bar.state) ? (
                    <text className="cancelled" x={x1 + w} y={y + ROW_H / 2 + 4} style={{ fontSize: 12 }} fill={INK}
                          textAnchor="middle">✕</text>
                  ) : null}
                </g>
              );
            })}
            {bars.filter((b) => b.kind === "attempt" && b.original && firstBarOf.get(b.attempt ?? "") === b).map((copy) => {
              const original = firstBarOf.get(copy.original ?? "");
              if (!original) return null;
              const x = scale.x(copy.start);
              const y1 = (yOf.get(rowKey(original.host, original.slot)) ?? 0) + ROW_H / 2;
              const y2 = (yOf.get(rowKey(copy.host, copy.slot)) ?? 0) + ROW_H / 2;
              return (
                <path key={`link:${copy.id}`} className="copy-link" data-from={copy.original ?? ""}
                      data-to={copy.attempt ?? ""} d={`M${x - 12},${y1} C${x},${y1} ${x - 12},${y2} ${x},${y2}`}
                      fill="none" stroke={INK} strokeWidth={1.2} markerEnd="url(#rf-arrow)" />
              );
            })}
            {data.active ? (
              <line x1={scale.x(now)} x2={scale.x(now)} y1={TOP} y2={TOP + rows.length * ROW_H} stroke={MUTED_INK}
                    strokeDasharray="2 2" />
            ) : null}
          </svg>
        </Box>
      </Grid>
      <Box id="hovered" mt={2} minH="2.6em" fontSize="sm">
        {hovered ? <BarDetails bar={hovered} /> : <Text color="fg.muted">hover a bar for its details</Text>}
      </Box>
    </Box>
  );
}

function BarDetails({ bar }: { bar: Bar }) {
  const span = `${formatTime(bar.start)} - ${bar.end === null ? "now" : formatTime(bar.end)}`;
  const took = bar.end === null ? "" : ` (${formatDuration(bar.end - bar.start)})`;
  const place = bar.host === null ? "no slot yet" : `${bar.host}${bar.slot === null ? "" : ` slot ${bar.slot}`}`;
  const what = bar.kind === "wait"
    ? `waited for ${bar.slots} slot(s)`
    : `attempt ${bar.attempt}${bar.speculative ? ` (speculative copy of ${bar.original ?? "?"})` : ""}`;
  return (
    <Box>
      <Text fontWeight="semibold">{`${bar.task_id}[${bar.shard}] · ${what} · ${bar.state}${bar.winner ? " · winner" : ""}`}</Text>
      <Text>
        {`${span}${took} · ${place} · ${bar.slots} slot(s)`}
        {bar.input_bytes !== null ? ` · read ${formatBytes(bar.input_bytes)}` : ""}
        {bar.try_number !== null ? ` · try ${bar.try_number}` : ""}
      </Text>
      {bar.message ? <Text color="fg.muted">{bar.message}</Text> : null}
    </Box>
  );
}
