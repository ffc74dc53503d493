// The traced run, bundled with the module instrumented (scripts/trace.ts builds and starts it):
// each object of a manifest admitted as the API server and Pepr admit it: the object as the API
// server hands it to webhooks (defaulted: test/support/admission.ts), Pepr's own mutate processor
// over the module's capabilities, the patch applied, then Pepr's validate processor. Each action
// Pepr runs is a step; the calls made in it are recorded (scripts/trace/recorder.ts) and written,
// with the steps, to the file named by the job.
import { readFileSync, writeFileSync } from "node:fs";
import { capabilities, policies } from "../../capabilities";
import { describeSource, loadManifests, type InputObject } from "../../cli/manifests";
import { SnapshotCluster } from "../../lib/cluster/view";
import { configureAdmission } from "../../lib/pepr/adapter";
import type { KubeObject } from "../../lib/objects/pod";
import { moduleEnvironment, settingsFromEnv } from "../../lib/settings";
import cfg from "../../package.json";
import {
  applyPatch,
  podCreateReview,
  workloadReview,
  type AdmissionResponse,
} from "../../test/support/admission";
import { Recorder, type RecordedCall, type TraceHook } from "./recorder";

export interface DriverJob {
  /** As the user named it, from `cwd`. */
  manifest: string;
  cwd: string;
  /** `Kind` or `Kind/name`: only those objects. */
  only?: string;
  /** Files or directories of the cluster's objects (namespaces, quotas, nodes, RBAC). */
  cluster: string[];
  out: string;
}

export type Action = "Mutate" | "Validate";

export interface TracedStep {
  object: number;
  /** The capability whose binding's action ran; "(pepr)" for calls Pepr made outside actions. */
  capability: string;
  action: Action;
  callback: string;
}

export interface DriverResult {
  errors: string[];
  objects: { label: string; outcome: string[] }[];
  steps: TracedStep[];
  calls: RecordedCall[];
}

const job = JSON.parse(readFileSync(process.argv[2], "utf8")) as DriverJob;
const recorder = new Recorder();
(globalThis as unknown as { __agTrace: TraceHook }).__agTrace = recorder.hook;

const steps: TracedStep[] = [];
const startStep = (step: TracedStep) => steps.push(step) - 1;
let current = { object: -1, outside: -1 };

// Each binding's action, as Pepr holds it, made to open its step: Pepr calls it, so the step is
// exactly what Pepr's processor ran, in its order (its filters decide which ran).
for (const capability of capabilities)
  for (const binding of capability.bindings)
    for (const [key, action] of [
      ["mutateCallback", "Mutate"],
      ["validateCallback", "Validate"],
    ] as const) {
      const original = binding[key] as ((req: unknown) => Promise<unknown>) | undefined;
      if (!original) continue;
      const traced = async (req: unknown) => {
        recorder.step = startStep({
          object: current.object,
          capability: capability.name,
          action,
          callback: original.name,
        });
        try {
          return await original(req);
        } finally {
          recorder.step = current.outside;
        }
      };
      // Pepr names the action in its logs by the callback's name.
      Object.defineProperty(traced, "name", { value: original.name });
      (binding as unknown as Record<string, unknown>)[key] = traced;
    }

// Pepr's processors, as its controller calls them for /mutate and /validate. Pepr's package
// exports neither, so they come from its sources, which esbuild bundles; required, not imported,
// as those sources do not type-check under this repository's strict settings.
type Processor<R> = (
  config: unknown,
  capabilities: readonly unknown[],
  request: unknown,
  metadata: Record<string, string>,
) => Promise<R>;
/* eslint-disable @typescript-eslint/no-require-imports */
const { mutateProcessor } = require("pepr/src/lib/processors/mutate-processor") as {
  mutateProcessor: Processor<AdmissionResponse>;
};
const { validateProcessor } = require("pepr/src/lib/processors/validate-processor") as {
  validateProcessor: Processor<AdmissionResponse[]>;
};
/* eslint-enable @typescript-eslint/no-require-imports */
// The module's configuration as Pepr's module makes it from package.json.
const peprConfig = { ...cfg.pepr, description: cfg.description };

/** One of Pepr's processors on a request, calls outside its actions in a step of their own. */
async function processed<T>(object: number, action: Action, run: () => Promise<T>): Promise<T> {
  current = {
    object,
    outside: startStep({ object, capability: "(pepr)", action, callback: "outside actions" }),
  };
  recorder.step = current.outside;
  try {
    return await run();
  } finally {
    recorder.step = -1;
  }
}

const namespaceOf = (obj: KubeObject) => obj.metadata?.namespace || "default";
const labelOf = (obj: KubeObject) =>
  `${obj.kind} ${namespaceOf(obj)}/${obj.metadata?.name ?? obj.metadata?.generateName ?? "?"}`;

function selected(objects: InputObject[], only?: string): InputObject[] {
  if (!only) return objects;
  const [kind, name] = only.split("/");
  return objects.filter(
    ({ object }) => object.kind === kind && (!name || object.metadata?.name === name),
  );
}

/** The seeds' cluster, and a namespace for each object whose namespace it has not. */
function clusterFor(clusterObjects: KubeObject[], objects: KubeObject[]): SnapshotCluster {
  const known = new Set(
    clusterObjects.filter(o => o.kind === "Namespace").map(o => o.metadata?.name),
  );
  const added = [...new Set(objects.map(namespaceOf))]
    .filter(ns => !known.has(ns))
    .map(name => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name, labels: { "kubernetes.io/metadata.name": name } },
    }));
  return new SnapshotCluster([...clusterObjects, ...added]);
}

function outcomeOfMutate(response: AdmissionResponse): string {
  const ops = response.patch
    ? (JSON.parse(Buffer.from(response.patch, "base64").toString("utf8")) as unknown[]).length
    : 0;
  return `mutate: ${response.allowed ? "allowed" : "refused"}, ${ops} patch operations`;
}

function outcomeOfValidate(responses: AdmissionResponse[]): string {
  const denials = responses.filter(r => !r.allowed).map(r => r.status?.message ?? "");
  const warnings = responses.flatMap(r => r.warnings ?? []).length;
  const verdict = denials.length ? `denied (${denials.join("; ").slice(0, 160)}…)` : "allowed";
  return `validate: ${verdict}, ${warnings} warnings`;
}

async function main(): Promise<DriverResult> {
  const read = { cwd: job.cwd, readStdin: async () => "" };
  const [file] = await loadManifests([job.manifest], read);
  const clusterFiles = await loadManifests(job.cluster, read);
  const errors = [file, ...clusterFiles].flatMap(f => f.errors);
  const inputs = selected(file.objects, job.only);
  if (!inputs.length)
    errors.push(`${job.manifest}: no object${job.only ? ` matching ${job.only}` : ""} to trace`);
  const result: DriverResult = { errors, objects: [], steps, calls: recorder.calls };
  if (errors.length) return result;

  const clusterObjects = clusterFiles.flatMap(f => f.objects.map(o => o.object));
  const settings = settingsFromEnv(moduleEnvironment(cfg.pepr.env as Record<string, string>));
  const cluster = clusterFor(
    clusterObjects,
    inputs.map(i => i.object),
  );
  configureAdmission({ settings, cluster, policies });

  for (const [index, { object, source }] of inputs.entries()) {
    // As the API server hands it to webhooks: defaulted, the Pod with its ServiceAccount volume.
    const review =
      object.kind === "Pod" ? podCreateReview(object) : workloadReview(object, "CREATE");
    const request = review.request!;
    const meta = { uid: request.uid, namespace: request.namespace ?? "", name: request.name ?? "" };
    const mutated = await processed(index, "Mutate", () =>
      mutateProcessor(peprConfig, capabilities, request, meta),
    );
    // The API server applies the patch, then sends the object as it will be stored.
    const patched = applyPatch(request.object as KubeObject, mutated);
    const validated = await processed(index, "Validate", () =>
      validateProcessor(peprConfig, capabilities, { ...request, object: patched }, meta),
    );
    result.objects.push({
      label: `${labelOf(object)} (CREATE; ${describeSource(source)})`,
      outcome: [outcomeOfMutate(mutated), outcomeOfValidate(validated)],
    });
  }
  return result;
}

void main().then(
  result => writeFileSync(job.out, JSON.stringify(result)),
  (e: unknown) => {
    writeFileSync(
      job.out,
      JSON.stringify({ errors: [String((e as Error).stack ?? e)], objects: [], steps, calls: [] }),
    );
  },
);
