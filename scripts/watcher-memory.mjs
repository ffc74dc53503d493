// After `pepr build`: the watcher Deployment (the reports' Namespace binding and its own paged
// lists and watches of Pods and workloads) gets the memory it needs. Pepr writes 256Mi/512Mi for
// every watcher. The watcher keeps per object what its report needs, not the object (issue 28):
// `npm run bench:scale -- --memory-limit 512` measured it in a 512 MiB memory cgroup, its heap
// what Node takes there, at 100,000 pods: settled 285 MiB, peak 357 MiB with churn, no OOM kill.
// So Pepr's 512Mi limit holds; the request is raised to what it holds settled at that size, so the
// scheduler places it where that memory is. In the manifest and in the Helm chart's values. A
// build without a watcher (reports and events off) is left alone.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parseDocument } from "yaml";
import { dist, manifest, pepr } from "./build-output.mjs";

export const WATCHER_MEMORY = { request: "384Mi", limit: "512Mi" };

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
