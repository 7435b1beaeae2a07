// A step chart of one value over time (slots used on a host, regions waiting in the FIFO queue).
// Each step with a value above zero is its own rectangle carrying its interval (data-from, data-to,
// data-value), so what is drawn can be checked against the store's grant rows.
import { Box, Text } from "@chakra-ui/react";
import { useState } from "react";

import { TimeAxis, timeScale } from "./axis";
import { INK, MUTED_INK, RULE } from "./colors";
import { formatTime } from "./format";
import type { Series } from "./types";
import { useWidth } from "./useWidth";

type Props = { name: string; label: string; series: Series; since: number; until: number; max: number;
               color: string; capacity?: number };

const LEFT = 40;
const HEIGHT = 64;
const TOP = 6;

export function StepChart({ name, label, series, since, until, max, color, capacity }: Props) {
  const [hover, setHover] = useState<number | null>(null);
  const [box, WIDTH] = useWidth<HTMLDivElement>();
  const scale = timeScale(since, until, LEFT, WIDTH - LEFT - 10);
  const top = Math.max(max, 1);
  const y = (v: number) => TOP + HEIGHT - (v / top) * HEIGHT;
  const steps = series.map(([t, v], i) => ({ from: t, to: i + 1 < series.length ? series[i + 1][0] : until, value: v }));
  const at = (t: number) => steps.find((s) => s.from <= t && t < s.to)?.value ?? 0;
  return (
    <Box className="step-chart" data-chart={name} mb={2} ref={box}>
      <Text fontSize="sm" fontWeight="semibold">{label}</Text>
      <svg
        width={WIDTH}
        height={HEIGHT + TOP + 18}
        role="img"
        aria-label={label}
        onMouseLeave={() => setHover(null)}
        onMouseMove={(event) => {
          const t = scale.t(event.clientX - event.currentTarget.getBoundingClientRect().left);
          setHover(t >= since && t <= until ? t : null);
        }}
      >
        <line x1={LEFT} x2={WIDTH - 10} y1={y(0)} y2={y(0)} stroke={RULE} />
        <text x={LEFT - 6} y={y(top) + 4} style={{ fontSize: 10 }} textAnchor="end" fill={MUTED_INK}>{top}</text>
        <text x={LEFT - 6} y={y(0)} style={{ fontSize: 10 }} textAnchor="end" fill={MUTED_INK}>0</text>
        <TimeAxis scale={scale} y={y(0)} height={HEIGHT} />
        {capacity !== undefined ? (
          <line x1={LEFT} x2={WIDTH - 10} y1={y(capacity)} y2={y(capacity)} stroke={MUTED_INK} strokeDasharray="4 3" />
        ) : null}
        {steps.filter((s) => s.value > 0 && s.to > s.from).map((s) => (
          <rect
            key={s.from}
            className="step"
            data-from={s.from}
            data-to={s.to}
            data-value={s.value}
            x={scale.x(s.from)}
            y={y(s.value)}
            width={Math.max(scale.x(s.to) - scale.x(s.from), 0.5)}
            height={y(0) - y(s.value)}
            fill={color}
            fillOpacity={0.75}
          />
        ))}
        {hover !== null ? (
          <line x1={scale.x(hover)} x2={scale.x(hover)} y1={TOP} y2={y(0)} stroke={INK} strokeWidth={0.8} />
        ) : null}
      </svg>
      <Text fontSize="xs" color="fg.muted" minH="1.2em">
        {hover !== null ? `${formatTime(hover)}: ${at(hover)}${capacity !== undefined ? ` of ${capacity}` : ""}` : ""}
      </Text>
    </Box>
  );
}
