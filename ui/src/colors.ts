// Colours from Airflow's theme: its semantic tokens per task state (success, failed, running, ...)
// as Chakra's CSS variables, so light and dark mode follow Airflow's. Fallbacks for a page outside it.

// regionflow's own states (attempts, grants) in Airflow's palettes; Airflow's task-instance states, which
// name their own palette, are in FALLBACK
const STATE_PALETTE: Record<string, string> = {
  succeeded: "success", killed: "upstream_failed", lost_commit: "skipped", created: "scheduled",
  waiting: "queued", granted: "queued", released: "queued", rejected: "failed", lost: "removed", mixed: "running",
};

const FALLBACK: Record<string, string> = {
  success: "#16a34a", running: "#0891b2", failed: "#dc2626", upstream_failed: "#d97706",
  skipped: "#db2777", scheduled: "#71717a", queued: "#78716c", removed: "#64748b",
  up_for_retry: "#ca8a04", deferred: "#9333ea", restarting: "#7c3aed", none: "#9ca3af",
};

/** The palette (Airflow's token name) a state is drawn in. */
export const paletteOf = (state: string | null | undefined): string =>
  STATE_PALETTE[state ?? ""] ?? (state && Object.hasOwn(FALLBACK, state) ? state : "none");

/** A CSS colour for a state: `solid` fill, `muted` background, `fg` text. */
export function stateColor(state: string | null | undefined, shade: "solid" | "muted" | "fg" = "solid"): string {
  const palette = paletteOf(state);
  return `var(--chakra-colors-${palette}-${shade}, ${FALLBACK[palette] ?? FALLBACK.none})`;
}

export const INK = "var(--chakra-colors-fg, #1f2937)";
export const MUTED_INK = "var(--chakra-colors-fg-muted, #6b7280)";
export const RULE = "var(--chakra-colors-border, #d1d5db)";
export const PANEL = "var(--chakra-colors-bg-panel, #ffffff)";
export const SUBTLE = "var(--chakra-colors-bg-subtle, #f3f4f6)";
export const DANGER = "var(--chakra-colors-danger-solid, #dc2626)";
