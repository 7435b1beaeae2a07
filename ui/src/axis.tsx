// A time axis for the charts: a linear scale from epoch seconds to x, with ticks at round steps.
import { formatTime } from "./format";
import { MUTED_INK, RULE } from "./colors";

const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

export type Scale = { x: (t: number) => number; t: (x: number) => number; from: number; to: number; width: number };

export function timeScale(from: number, to: number, left: number, width: number): Scale {
  const span = Math.max(to - from, 1e-3);
  return {
    x: (t) => left + ((t - from) / span) * width,
    t: (x) => from + ((x - left) / width) * span,
    from, to, width,
  };
}

/** Tick times: the smallest round step that leaves at least ~90 px between ticks. */
export function ticks(scale: Scale): number[] {
  const span = scale.to - scale.from;
  const wanted = Math.max(2, Math.floor(scale.width / 90));
  const step = STEPS.find((s) => span / s <= wanted) ?? Math.ceil(span / wanted / 86400) * 86400;
  const first = Math.ceil(scale.from / step) * step;
  const out: number[] = [];
  for (let t = first; t <= scale.to && out.length < 200; t += step) out.push(t);
  return out;
}

export function TimeAxis({ scale, y, height }: { scale: Scale; y: number; height: number }) {
  const marks = ticks(scale);
  const spanDays = (scale.to - scale.from) / 86400;
  return (
    <g className="time-axis">
      {marks.map((t) => (
        <g key={t}>
          <line x1={scale.x(t)} x2={scale.x(t)} y1={y - height} y2={y} stroke={RULE} strokeWidth={0.6} />
          <text x={scale.x(t)} y={y + 12} style={{ fontSize: 10 }} textAnchor="middle" fill={MUTED_INK}>
            {formatTime(t, spanDays > 1)}
          </text>
        </g>
      ))}
    </g>
  );
}
