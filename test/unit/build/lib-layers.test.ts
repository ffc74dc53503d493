// lib/ layered one way (issue 42): the folder-level import graph of lib/, type imports included,
// has no cycle, and no folder imports one at or above its place in lib/layers.json. The lint rule
// (eslint.config.mjs, generated from the same list) stops such an import as it is written; this
// test also sees what ESLint does not (import(), require(), a folder missing from the list).
// Why: docs/adr/0031-lib-layered-one-way.md
import { readdirSync } from "node:fs";
import { join } from "node:path";
import {
  againstTheOrder,
  cycles,
  declaredOrder,
  folderGraph,
  libEdges,
  ROOT,
  type Edge,
} from "../../../scripts/lib-graph";

const edge = (from: string, to: string): Edge => ({
  from,
  to,
  file: `lib/${from}/x.ts`,
  specifier: `../${to}`,
  typeOnly: false,
});
const describeEdge = (e: Edge) =>
  `${e.file} imports ${e.specifier}${e.typeOnly ? " (type)" : ""}: lib/${e.from} -> lib/${e.to}`;

describe("lib/ folders in one direction", () => {
  const order = declaredOrder();
  const edges = libEdges();

  it("lib/layers.json names every lib/ folder once", () => {
    const folders = readdirSync(join(ROOT, "lib"), { withFileTypes: true })
      .filter(d => d.isDirectory())
      .map(d => d.name)
      .sort();
    expect([...order].sort()).toEqual(folders);
    expect(new Set(order).size).toBe(order.length);
  });

  it("sees the imports between folders, type imports included", () => {
    // Known edges of today's code, one runtime and one type-only: the graph is read, not empty.
    expect(edges).toContainEqual(expect.objectContaining({ from: "engine", to: "objects" }));
    expect(edges.some(e => e.typeOnly)).toBe(true);
  });

  it("has no cycle", () => {
    expect(cycles(folderGraph(edges))).toEqual([]);
  });

  it("has no import against the declared order", () => {
    expect(againstTheOrder(edges, order).map(describeEdge)).toEqual([]);
  });
});

describe("the checks themselves", () => {
  it("find a loop, direct or round several folders", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["a"]],
      ["e", ["e"]],
    ]);
    expect(cycles(graph)).toEqual([["a", "b", "c"]]);
    expect(
      cycles(
        new Map([
          ["a", ["b"]],
          ["b", []],
        ]),
      ),
    ).toEqual([]);
  });

  it("refuse an import upwards, sideways within a layer, or of a folder not in the order", () => {
    const order = ["objects", "engine", "pepr"];
    const bad = [edge("objects", "engine"), edge("engine", "engine"), edge("engine", "images")];
    const good = [edge("engine", "objects"), edge("pepr", "engine"), edge("pepr", "objects")];
    expect(againstTheOrder([...good, ...bad], order)).toEqual(bad);
  });
});
