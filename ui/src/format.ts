// How values are written on the pages: durations and bytes for people, times in the time zone the
// user chose in Airflow's UI (its "timezone" setting in local storage; UTC, Airflow's default, else).

/** The time zone Airflow's UI shows times in. */
export function airflowTimeZone(): string {
  try {
    const stored = window.localStorage.getItem("timezone");
    const zone = stored ? (JSON.parse(stored) as string) : "UTC";
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return zone;
  } catch {
    return "UTC";
  }
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** "2026-12-04 12:03:07 UTC": an epoch-seconds time as Airflow writes dates (empty for none). */
export function formatTime(epoch: number | null | undefined, withDate = true): string {
  if (epoch === null || epoch === undefined) return "";
  const zone = airflowTimeZone();
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  }).formatToParts(new Date(epoch * 1000));
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? "";
  const time = `${get("hour")}:${get("minute")}:${get("second")}`;
  return withDate ? `${get("year")}-${get("month")}-${get("day")} ${time} ${get("timeZoneName")}` : time;
}

/** "850 ms", "12.4 s", "3m 05s", "2h 04m" (empty for none). */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "";
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(Math.floor(s % 60))}s`;
  return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** "512 B", "1.5 MiB" (empty for none). */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return "";
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value < 10 ? value.toFixed(2) : value.toFixed(1)} ${UNITS[unit]}`;
}

/** A figure with at most 3 decimals ("87.117"), integers as they are. */
export function formatNumber(value: unknown): string {
  if (typeof value !== "number") return value === null || value === undefined ? "" : String(value);
  return Number.isInteger(value) ? value.toLocaleString("en-US") : String(+value.toFixed(3));
}
