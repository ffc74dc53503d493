// After `pepr build`: the watcher Deployment (the reports' and Events' Watch bindings) gets the
// memory it needs. Pepr writes 256Mi/512Mi for every watcher; `npm run bench:reports` measured it
// settled at ~350 MB with 2,000 pods and ~611 MB with 10,000 (476 MB of that Pepr's own watch
// caches), peaking at up to 942 MB while it starts and under churn: at that size the default limit
// gets the watcher OOM-killed. Sizing rule (docs/bench.md): settled ≈ 285 MiB + 33 MiB per 1,000
// pods, peaks ≈ 1.5 × that. The build writes a request for the settled size and a limit for the
// peaks at 10,000 pods, in the manifest and in the Helm chart's values. A build without a watcher
// (reports and events off) is left alone.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parseDocument } from "yaml";
import { dist, manifest, pepr } from "./build-output.mjs";

export const WATCHER_MEMORY = { request: "640Mi", limit: "1280Mi" };

const values = new URL(`${pepr.uuid}-chart/values.yaml`, dist);

function fail(message) {
  console.error(`watcher-memory: ${message}`);
  process.exit(1);
}

if (!existsSync(manifest)) fail(`${manifest.pathname} is missing: run pepr build first`);
const docs = parseAllDocuments(readFileSync(manifest, "utf8"));
const watcher = docs.find(
  d =>
    d.get("kind") === "Deployment" && String(d.get("metadata")?.get("name")).endsWith("-watcher"),
);
if (!watcher) {
  console.log("watcher memory: no watcher in this build (reports and events off)");
  process.exit(0);
}
const containers = watcher.getIn(["spec", "template", "spec", "containers"]);
if (!containers?.items?.length) fail("the watcher Deployment has no containers");
for (const c of containers.items) {
  c.setIn(["resources", "requests", "memory"], WATCHER_MEMORY.request);
  c.setIn(["resources", "limits", "memory"], WATCHER_MEMORY.limit);
}
writeFileSync(manifest, docs.map(d => d.toString()).join(""));

if (!existsSync(values))
  fail(`${values.pathname} is missing: pepr build wrote no Helm chart there`);
const chart = parseDocument(readFileSync(values, "utf8"));
if (!chart.hasIn(["watcher", "resources"])) fail(`${values.pathname}: no watcher.resources`);
chart.setIn(["watcher", "resources", "requests", "memory"], WATCHER_MEMORY.request);
chart.setIn(["watcher", "resources", "limits", "memory"], WATCHER_MEMORY.limit);
writeFileSync(values, chart.toString());
console.log(
  `watcher memory: request ${WATCHER_MEMORY.request}, limit ${WATCHER_MEMORY.limit} in the manifest and the Helm chart`,
);
