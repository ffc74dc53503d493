// After `pepr build`: the module's mutating webhook asks to be called again (reinvocationPolicy:
// IfNeeded) when a later mutating webhook — a sidecar injector such as Istio's, Linkerd's or
// Vault's — changes the pod after us, so its containers get the same fixes. Pepr 1.1.4 writes no
// reinvocationPolicy (Kubernetes then defaults to Never), so this sets it in the two deploy
// artifacts: dist/pepr-module-<uuid>.yaml and the Helm chart's mutation-webhook template.
// Anything it cannot find to change is an error: a Pepr upgrade that moves these files must not
// ship a module that silently lost the setting.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { dist, manifest, pepr } from "./build-output.mjs";

const POLICY = "IfNeeded";
// The Helm chart's webhook template, where the same setting goes.
const chartTemplate = new URL(`${pepr.uuid}-chart/templates/mutation-webhook.yaml`, dist);

function fail(message) {
  console.error(`webhook-reinvocation: ${message}`);
  process.exit(1);
}

/** The manifest: every webhook of the MutatingWebhookConfiguration, set through the YAML model. */
function setInManifest(path) {
  if (!existsSync(path)) fail(`${path.pathname} is missing: run pepr build first`);
  const docs = parseAllDocuments(readFileSync(path, "utf8"));
  const mutating = docs.filter(d => d.get("kind") === "MutatingWebhookConfiguration");
  if (mutating.length !== 1)
    fail(`${path.pathname}: expected one MutatingWebhookConfiguration, found ${mutating.length}`);
  const webhooks = mutating[0].get("webhooks");
  if (!webhooks?.items?.length)
    fail(`${path.pathname}: the MutatingWebhookConfiguration has no webhooks`);
  for (const webhook of webhooks.items) webhook.set("reinvocationPolicy", POLICY);
  // Each document after the first writes its own `---` start marker.
  writeFileSync(path, docs.map(d => d.toString()).join(""));
  return webhooks.items.length;
}

/**
 * The Helm template is YAML with Go template actions in it, so it cannot go through a YAML parser:
 * the line is added beside `sideEffects:` of each webhook, at its indentation.
 */
function setInChartTemplate(path) {
  if (!existsSync(path)) fail(`${path.pathname} is missing: pepr build wrote no Helm chart there`);
  const lines = readFileSync(path, "utf8").split("\n");
  const webhooks = lines.filter(l => /^\s*- admissionReviewVersions:\s*$/.test(l)).length;
  const out = [];
  let set = 0;
  for (const line of lines) {
    if (/^\s*reinvocationPolicy:/.test(line)) continue; // a second run sets it once
    const sideEffects = /^(\s*)sideEffects:/.exec(line);
    if (sideEffects) {
      out.push(`${sideEffects[1]}reinvocationPolicy: ${POLICY}`);
      set++;
    }
    out.push(line);
  }
  if (!webhooks || set !== webhooks)
    fail(
      `${path.pathname}: found ${webhooks} webhook(s) but ${set} sideEffects line(s) to set the policy beside`,
    );
  writeFileSync(path, out.join("\n"));
  return set;
}

const inManifest = setInManifest(manifest);
const inChart = setInChartTemplate(chartTemplate);
console.log(
  `reinvocationPolicy: ${POLICY} on ${inManifest} mutating webhook(s) of the manifest and ${inChart} of the Helm chart`,
);
