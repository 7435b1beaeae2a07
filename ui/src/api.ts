// Reads the plugin's JSON API (mounted by Airflow's api-server under /regionflow, behind Airflow's
// auth: the UI's session cookie goes with same-origin requests).
import { useEffect, useRef, useState } from "react";

/** The URL of a plugin API path ("api/cluster"), relative to Airflow's base URL. */
export const apiUrl = (path: string): string => new URL(`regionflow/${path}`, document.baseURI).href;

/** Quote one path segment (a DAG id or run id) for an API path. */
export const seg = (value: string): string => encodeURIComponent(value);

export type Polled<T> = {
  data?: T;
  error?: string;
  updatedAt?: number;
  polling: boolean;
};

/** GET `path` now and every `everyMs` ms while `keepPolling(data)` holds (default: always). A
 * failed request keeps the last data and says why; `path` null reads nothing. */
export function usePolled<T>(path: string | null, everyMs = 5000,
                             keepPolling: (data: T) => boolean = () => true): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ polling: true });
  const keep = useRef(keepPolling);
  keep.current = keepPolling;

  useEffect(() => {
    if (path === null) return undefined;
    let timer: number | undefined;
    let stopped = false;
    const read = async () => {
      try {
        const response = await fetch(apiUrl(path), { credentials: "same-origin",
                                                      headers: { Accept: "application/json" } });
        const body = await response.json().catch(() => ({}));
        if (stopped) return;
        if (!response.ok) {
          const detail = typeof body?.detail === "string" ? body.detail : response.statusText;
          // a missing object may appear (a run's first attempt); a refused or bad request will not change
          const retry = response.status === 404 || response.status >= 500;
          setState((old) => ({ ...old, error: `${response.status}: ${detail}`, polling: retry }));
          if (retry) timer = window.setTimeout(read, everyMs);
          return;
        }
        const polling = keep.current(body as T);
        setState({ data: body as T, updatedAt: Date.now(), polling });
        if (polling) timer = window.setTimeout(read, everyMs);
      } catch (error) {
        if (stopped) return;
        setState((old) => ({ ...old, error: String(error), polling: true }));
        timer = window.setTimeout(read, everyMs);
      }
    };
    setState({ polling: true });
    void read();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, [path, everyMs]);
  return state;
}
