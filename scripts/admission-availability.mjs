// After `pepr build`: what the admission Deployment needs to stay available while its pods come and
// go (a rollout, a drained node, a deleted pod), measured on the node tier (test/node/50-deploy):
// - a preStop hook that drains the pod (GET /admission-guard/drain, lib/webhook-body-limit.ts:
//   answers carry `Connection: close` for 5 s, then SIGTERM), so no request is sent on a kept-alive
//   connection as Pepr closes its server, and a termination grace period that covers it (15 s).
//   The hook is an `exec` of the image's node inside the container, calling 127.0.0.1: the server
//   honours the drain from a loopback peer only, so no other pod can switch it on;
// - a PodDisruptionBudget (minAvailable 1), so a node drain never takes both replicas at once.
// In dist/pepr-module-<uuid>.yaml and in the Helm chart. Idempotent; anything it cannot find to
// change is an error, as for scripts/webhook-reinvocation.mjs.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parseDocument, stringify } from "yaml";
import { chart, manifest, pepr } from "./build-output.mjs";

const DRAIN_PATH = "/admission-guard/drain"; // lib/webhook-body-limit.ts DRAIN_PATH
const GRACE_SECONDS = 15;
/**
 * The drain call, run by the image's node: waits for the answer (the drain's 5 s) and fails the
 * hook, visibly (a FailedPreStopHook Event), on an error or after 10 s. The certificate is the
 * module's own, for its Service name, so it is not verified on 127.0.0.1.
 */
const DRAIN_SCRIPT = [
  `const r=require("https").get({host:"127.0.0.1",port:3000,path:"${DRAIN_PATH}",rejectUnauthorized:false},`,
  `s=>{s.resume();s.on("end",()=>process.exit(s.statusCode===200?0:1))});`,
  `r.on("error",()=>process.exit(1));setTimeout(()=>process.exit(1),10000).unref()`,
].join("");
const PRE_STOP = { exec: { command: ["node", "-e", DRAIN_SCRIPT] } };

const NAME = `pepr-${pepr.uuid}`;

function fail(message) {
  console.error(`admission-availability: ${message}`);
  process.exit(1);
}

const budget = {
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: NAME, namespace: "pepr-system" },
  spec: {
    minAvailable: 1,
    selector: { matchLabels: { app: NAME, "pepr.dev/controller": "admission" } },
  },
};

// The manifest, through the YAML model.
if (!existsSync(manifest)) fail(`${manifest.pathname} is missing: run pepr build first`);
const docs = parseAllDocuments(readFileSync(manifest, "utf8")).filter(
  d => d.get("kind") !== "PodDisruptionBudget",
);
const admission = docs.find(
  d => d.get("kind") === "Deployment" && d.getIn(["metadata", "name"]) === NAME,
);
if (!admission) fail(`${manifest.pathname}: no admission Deployment ${NAME}`);
admission.setIn(["spec", "template", "spec", "terminationGracePeriodSeconds"], GRACE_SECONDS);
const containers = admission.getIn(["spec", "template", "spec", "containers"]);
if (containers?.items?.length !== 1) fail("the admission Deployment should have one container");
containers.items[0].setIn(["lifecycle", "preStop"], admission.createNode(PRE_STOP));
writeFileSync(manifest, docs.map(d => d.toString()).join("") + `---\n${stringify(budget)}`);

// The Helm chart: its values, its Deployment template (YAML with Go template actions: by line),
// and a template of its own for the budget.
const values = new URL("values.yaml", chart);
const template = new URL("templates/admission-deployment.yaml", chart);
if (!existsSync(values) || !existsSync(template)) fail(`${chart.pathname}: no Helm chart there`);
const valuesDoc = parseDocument(readFileSync(values, "utf8"));
if (!valuesDoc.hasIn(["admission", "terminationGracePeriodSeconds"]))
  fail("values.yaml has no admission.terminationGracePeriodSeconds");
valuesDoc.setIn(["admission", "terminationGracePeriodSeconds"], GRACE_SECONDS);
writeFileSync(values, valuesDoc.toString());

/** The hook as template lines, at the container's indentation. */
const hookLines = pad => [
  `${pad}lifecycle:`,
  `${pad}  preStop:`,
  `${pad}    exec:`,
  `${pad}      command:`,
  `${pad}        - node`,
  `${pad}        - -e`,
  `${pad}        - ${JSON.stringify(DRAIN_SCRIPT)}`,
];
const lines = readFileSync(template, "utf8").split("\n");
const out = [];
let added = 0;
for (let i = 0; i < lines.length; i++) {
  // A second run: the block this script wrote (this one, or an older one's httpGet hook) goes,
  // and is written again below.
  const block = /^(\s*)lifecycle:\s*$/.exec(lines[i]);
  if (block) {
    while (i + 1 < lines.length && lines[i + 1].startsWith(`${block[1]} `)) i++;
    continue;
  }
  const ports = /^(\s*)ports:\s*$/.exec(lines[i]);
  if (ports && !added) {
    out.push(...hookLines(ports[1]));
    added++;
  }
  out.push(lines[i]);
}
if (!added) fail(`${template.pathname}: no container ports to put the preStop hook beside`);
writeFileSync(template, out.join("\n"));
writeFileSync(
  new URL("templates/admission-pdb.yaml", chart),
  `{{- if .Values.admission.enabled }}\n${stringify(budget)}{{- end }}\n`,
);
console.log(
  `admission availability: preStop drain (exec, loopback only), terminationGracePeriodSeconds ${GRACE_SECONDS}, PodDisruptionBudget minAvailable 1, in the manifest and the Helm chart`,
);
