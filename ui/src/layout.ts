// The plan's logical graph laid out in layers, left to right (dagre, a layered layout as Airflow's
// own graph view uses with ELK), with each logical region as a box around its vertices.
import dagre from "@dagrejs/dagre";

import type { PlanEdge, PlanRegion, PlanVertex, PlanView } from "./types";

/** A region's heading in the drawing (its state shows as the box's colour and in the regions table). */
export function regionHead(r: PlanRegion): string {
  const slots = `${r.slots_per_region} slot${r.slots_per_region === 1 ? "" : "s"}`;
  return `region ${r.index} · ${slots}${r.execution_regions > 1 ? ` × ${r.execution_regions}` : ""}`;
}

/** A vertex's parallelism line: its value (the run's decided one, if any) and, if adaptive, its range. */
export function parallelismText(v: PlanVertex): string {
  if (v.range === null) return `parallelism ${v.parallelism}`;
  const range = `range ${v.range[0]}-${v.range[1]}`;
  return v.decided === null ? `parallelism ${v.parallelism} (${range})` : `parallelism ${v.decided} (run; ${range})`;
}

export type Point = { x: number; y: number };
export type Placed = { x: number; y: number; width: number; height: number };
export type Layout = {
  width: number; height: number;
  vertices: Map<string, Placed>;
  regions: Map<number, Placed>;
  edges: { edge: PlanEdge; points: Point[] }[];
};

export const NODE_H = 42;
export const REGION_HEAD = 20;
const CHAR_W = 7;

/** Left-top boxes for vertices and regions, and each edge's route. */
export function layOut(view: PlanView): Layout {
  const g = new dagre.graphlib.Graph({ compound: true, multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 30 + REGION_HEAD, ranksep: 80, marginx: 16, marginy: 16 + REGION_HEAD });
  g.setDefaultEdgeLabel(() => ({}));
  for (const region of view.regions) g.setNode(`region:${region.index}`, { paddingTop: REGION_HEAD });
  // a region of one vertex is as wide as that vertex: make that vertex wide enough for the region's heading
  const headWidth = new Map(view.regions.filter((r) => r.vertices.length === 1)
    .map((r) => [r.index, regionHead(r).length * 6.2 + 16]));
  for (const v of view.vertices) {
    const text = Math.max(v.name.length, parallelismText(v).length);
    const own = headWidth.get(v.region) ?? 0;
    g.setNode(`v:${v.name}`, { width: Math.max(90, text * CHAR_W + 24, own), height: NODE_H });
    g.setParent(`v:${v.name}`, `region:${v.region}`);
  }
  view.edges.forEach((e, i) => g.setEdge(`v:${e.src}`, `v:${e.dst}`, { width: 40, height: 14, labelpos: "c" }, String(i)));
  dagre.layout(g);

  const box = (id: string, grow = 0): Placed => {
    const n = g.node(id);
    return { x: n.x - n.width / 2, y: n.y - n.height / 2 - grow, width: n.width, height: n.height + grow };
  };
  const vertices = new Map(view.vertices.map((v) => [v.name, box(`v:${v.name}`)]));
  const regions = new Map(view.regions.map((r) => [r.index, box(`region:${r.index}`, REGION_HEAD)]));
  const edges = view.edges.map((edge, i) => ({
    edge, points: g.edge({ v: `v:${edge.src}`, w: `v:${edge.dst}`, name: String(i) }).points }));
  const graph = g.graph();
  return { width: graph.width ?? 0, height: graph.height ?? 0, vertices, regions, edges };
}
