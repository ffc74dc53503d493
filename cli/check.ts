// `admission-guard check`: the offline front door. Reads manifests, runs every object through the
// engine's review() — the same rules, in the same order, as the webhook — and prints what would be
// fixed and what would be denied with its fix. Offline and light: no Pepr, no cluster client.
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import cfg from "../package.json";
import { SnapshotCluster } from "../lib/cluster/view";
import { imageInspectorFor } from "../lib/images/inspector";
import { localDockerCredentials } from "../lib/images/credentials";
import { CloudCredentials, FETCH_TIMEOUT_MS } from "../lib/images/cloud/store";
import { review } from "../lib/engine";
import { describeObject, type KubeObject } from "../lib/objects/pod";
import type { Operation } from "../lib/engine/policy";
import {
  NS_KEYS,
  parseSettings,
  parseSettingsYaml,
  SettingsError,
  type Settings,
} from "../lib/settings";
import { withApiDefaults } from "./api-defaults";
import { commandArgs, startCommand, UsageError } from "./command";
import type { CliIO } from "./io";
import {
  describeSource,
  loadManifests,
  renderManifest,
  replaceObjects,
  sameData,
  STDIN,
  type ManifestFile,
} from "./manifests";
import {
  policyReportsYaml,
  styleFor,
  textBlock,
  textSummary,
  toJson,
  type Checked,
} from "./report";
import { OPENREPORTS, WGPOLICYK8S } from "../lib/reports/report-apis";
import { schemaProblems } from "./schema";

/** How long `check --inspect-images` waits for the cloud identity's tokens: one fetch's time. */
export const CHECK_CLOUD_WAIT_MS = FETCH_TIMEOUT_MS + 1000;

export const CHECK_USAGE = `Usage: admission-guard check [options] FILE|DIR|- ...

Runs admission-guard's rules on manifests, offline: prints what would be fixed, and what would be
denied with how to fix it. Reads YAML (multi-document), JSON and List objects (helm template,
kubectl get -o yaml, mlflow run --dry-run); directories recursively (.yaml, .yml, .json); - is stdin.

Options:
  -n, --namespace NS       namespace of objects that have none (default "default")
      --settings FILE      admission-guard settings (YAML or JSON, the module's keys)
      --cluster FILE|DIR   cluster objects as kubectl get -o yaml prints them: Namespaces (their
                           mode and policy labels), ResourceQuotas, LimitRanges, Nodes,
                           ServiceAccounts, RBAC, Exemptions, KServe's ServingRuntimes and
                           ClusterServingRuntimes. Repeatable.
      --operation OP       CREATE (default) or UPDATE
  -o, --output FORMAT      text (default), json (one object per line), policyreport (a
                           wgpolicyk8s.io/v1alpha2 PolicyReport per namespace, as YAML: what the
                           watcher writes in the cluster for the objects that run), or
                           openreports (the same as openreports.io/v1alpha1 Reports)
      --fix                write the fixed manifests back to their files (stdin: to stdout)
      --inspect-images     read each image's config (User, WorkingDir, Env) from its registry,
                           as the webhook does (settings images.plainHttp, images.budgetMs);
                           with the credentials of $DOCKER_CONFIG/config.json (default
                           ~/.docker/config.json), then images.cloudCredentials' from this
                           environment (AWS_*, AZURE_*, the GKE metadata server: docs/check.md);
                           without it each image counts as not inspected, and the output says
                           which user the fix assumed
  -h, --help               this help

Exit codes: 0 all allowed, 1 something would be denied, 2 usage, settings or parse errors.
`;

const OUTPUT_FORMATS = ["text", "json", "policyreport", "openreports"] as const;
type OutputFormat = (typeof OUTPUT_FORMATS)[number];

interface CheckOptions {
  inputs: string[];
  namespace: string;
  settingsFile?: string;
  clusterPaths: string[];
  operation: Operation;
  output: OutputFormat;
  fix: boolean;
  inspectImages: boolean;
  help: boolean;
}

export function parseCheckArgs(argv: string[]): CheckOptions {
  const { values, positionals } = commandArgs(argv, {
    namespace: { type: "string", short: "n", default: "default" },
    settings: { type: "string" },
    cluster: { type: "string", multiple: true, default: [] },
    operation: { type: "string", default: "CREATE" },
    output: { type: "string", short: "o", default: "text" },
    fix: { type: "boolean", default: false },
    "inspect-images": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  });
  const operation = values.operation.toUpperCase();
  if (operation !== "CREATE" && operation !== "UPDATE")
    throw new UsageError(`--operation must be CREATE or UPDATE, not "${values.operation}"`);
  if (!(OUTPUT_FORMATS as readonly string[]).includes(values.output))
    throw new UsageError(`--output must be ${OUTPUT_FORMATS.join(", ")}, not "${values.output}"`);
  if (!values.namespace) throw new UsageError("--namespace must not be empty");
  if (values.cluster.includes("-"))
    throw new UsageError("--cluster reads files or directories, not stdin");
  if (!values.help && positionals.length === 0)
    throw new UsageError("no input: give manifest files, directories, or - for stdin");
  return {
    inputs: positionals,
    namespace: values.namespace,
    settingsFile: values.settings,
    clusterPaths: values.cluster,
    operation,
    output: values.output as OutputFormat,
    fix: values.fix,
    inspectImages: values["inspect-images"],
    help: values.help,
  };
}

/** Reads --settings; a bad file or a bad setting is an error naming it. */
export async function loadSettings(file: string | undefined, cwd: string): Promise<Settings> {
  if (!file) return parseSettings({}, "defaults");
  let text: string;
  try {
    text = await readFile(resolve(cwd, file), "utf8");
  } catch (e) {
    throw new UsageError(`${file}: cannot read (${(e as NodeJS.ErrnoException).code})`);
  }
  let raw: unknown;
  try {
    raw = parseSettingsYaml(text);
  } catch (e) {
    throw new UsageError(`${file}: not valid YAML or JSON: ${(e as Error).message.split("\n")[0]}`);
  }
  if (raw !== null && raw !== undefined && (typeof raw !== "object" || Array.isArray(raw)))
    throw new UsageError(`${file}: settings must be a mapping of the module's setting keys`);
  return parseSettings(raw ?? {}, file);
}

/** Kinds without a namespace, so the report does not invent one for them. */
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "Node",
  "ClusterRole",
  "ClusterRoleBinding",
  "PersistentVolume",
  "StorageClass",
  "PriorityClass",
  "CustomResourceDefinition",
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
  "RuntimeClass",
  "IngressClass",
  "ClusterServingRuntime",
]);

/** KServe's runtimes, which an InferenceService's model container is built from. */
const RUNTIME_KINDS = new Set(["ServingRuntime", "ClusterServingRuntime"]);
const sameObject = (a: KubeObject, b: KubeObject) =>
  a.kind === b.kind &&
  a.metadata?.name === b.metadata?.name &&
  (a.metadata?.namespace ?? "") === (b.metadata?.namespace ?? "");

/**
 * The manifest to commit: the reviewed object without admission-guard's trace annotation, which
 * records changes made at admission — once in the manifest, the values are the user's own.
 */
function forCommit(fixed: KubeObject, original: KubeObject): KubeObject {
  const annotations = fixed.metadata?.annotations;
  if (!annotations || !(NS_KEYS.fixed in annotations)) return fixed;
  if (original.metadata?.annotations?.[NS_KEYS.fixed] !== undefined) return fixed;
  const copy = structuredClone(fixed);
  delete copy.metadata!.annotations![NS_KEYS.fixed];
  if (!Object.keys(copy.metadata!.annotations!).length && !original.metadata?.annotations)
    delete copy.metadata!.annotations;
  return copy;
}

/** What `check` and `test` judge objects with: the settings, the cluster, the request. */
export interface JudgeInput {
  /** The --cluster snapshot's objects. */
  clusterObjects: KubeObject[];
  settings: Settings;
  operation: Operation;
  /** The namespace of objects that have none. */
  namespace: string;
  inspectImages: boolean;
  io: CliIO;
}

/**
 * Every object of the files through review(), as the webhook would judge it: refused first when the
 * API server would refuse it (an error, no verdict), else a result. The one path `check` and `test`
 * share, so they cannot disagree. Errors name the file and document.
 */
export async function judgeFiles(
  files: Pick<ManifestFile, "objects">[],
  input: JudgeInput,
): Promise<{ results: Checked[]; errors: string[]; cluster: SnapshotCluster }> {
  const { clusterObjects, settings, io } = input;
  // Namespaces created by the manifests themselves count as cluster objects, unless the snapshot
  // already has them (then the snapshot is what the cluster really holds).
  const known = new Set(
    clusterObjects.filter(o => o.kind === "Namespace").map(o => o.metadata?.name),
  );
  const inputObjects = files.flatMap(f => f.objects.map(o => o.object));
  const inputNamespaces = inputObjects.filter(
    o => o.kind === "Namespace" && !known.has(o.metadata?.name),
  );
  // So are the DRA objects applied with them (a ResourceClaimTemplate next to the Deployment that
  // uses it), unless the snapshot holds that kind: then it says what the cluster has.
  const draKinds = new Set(["ResourceClaimTemplate", "DeviceClass", "ResourceSlice"]);
  const snapshotKinds = new Set(clusterObjects.map(o => o.kind));
  const inputDra = inputObjects
    .filter(
      o =>
        draKinds.has(String(o.kind)) &&
        !snapshotKinds.has(o.kind) &&
        String(o.apiVersion ?? "").startsWith("resource.k8s.io/"),
    )
    // A template without a namespace lands in the one -n names, as kubectl apply puts it.
    .map(o =>
      o.kind === "ResourceClaimTemplate" && !o.metadata?.namespace
        ? { ...o, metadata: { ...o.metadata, namespace: input.namespace } }
        : o,
    );
  // So are KServe's runtimes applied with an InferenceService (its model container is built from one).
  const inputRuntimes = inputObjects
    .filter(
      o =>
        RUNTIME_KINDS.has(String(o.kind)) &&
        String(o.apiVersion ?? "").startsWith("serving.kserve.io/"),
    )
    .map(o =>
      o.kind === "ServingRuntime" && !o.metadata?.namespace
        ? { ...o, metadata: { ...o.metadata, namespace: input.namespace } }
        : o,
    )
    .filter(o => !clusterObjects.some(c => sameObject(c, o)));
  // The cloud identity's registry credentials as the controller gets them, from this process's
  // env, each token given CHECK_CLOUD_WAIT_MS to arrive; after the docker config's, as the
  // controller's come after its Secrets'.
  const cloud = input.inspectImages
    ? new CloudCredentials(settings.images.cloudCredentials, {
        env: io.env,
        plainHttp: settings.images.plainHttp,
        log: { warn: (_, message) => io.stderr.write(`admission-guard: ${message}\n`) },
      })
    : undefined;
  if (cloud?.size) {
    cloud.start();
    await cloud.ready(CHECK_CLOUD_WAIT_MS);
  }
  const local = localDockerCredentials(io.env);
  const cluster = new SnapshotCluster(
    [...clusterObjects, ...inputNamespaces, ...inputDra, ...inputRuntimes],
    io.rbac,
    input.inspectImages
      ? imageInspectorFor(settings, undefined, registry => local(registry) ?? cloud?.get(registry))
      : undefined,
    // The uuid the install labels its Exemptions namespace with, as the controller reads it.
    cfg.pepr.uuid,
  );

  const results: Checked[] = [];
  const errors: string[] = [];
  for (const file of files) {
    for (const { source, object } of file.objects) {
      // What the API server would refuse is an input error, not a verdict: no rule runs on it.
      const refused = schemaProblems(object);
      if (refused.length) {
        for (const problem of refused)
          errors.push(`${describeSource(source)}: ${describeObject(object)}: ${problem}`);
        continue;
      }
      try {
        const r = await review(
          io.policies,
          withApiDefaults(object),
          {
            settings,
            cluster,
            operation: input.operation,
            namespace: CLUSTER_SCOPED.has(object.kind ?? "") ? "" : input.namespace,
          },
          io.validators,
        );
        results.push({ source, input: object, review: r });
      } catch (e) {
        errors.push(`${describeSource(source)}: ${(e as Error).message}`);
      }
    }
  }
  cloud?.stop();
  return { results, errors, cluster };
}

export async function runCheck(argv: string[], io: CliIO): Promise<number> {
  const err = (line: string) => io.stderr.write(line + "\n");
  const opts = startCommand("check", CHECK_USAGE, () => parseCheckArgs(argv), io);
  if (typeof opts === "number") return opts;
  let settings: Settings;
  try {
    settings = await loadSettings(opts.settingsFile, io.cwd);
  } catch (e) {
    if (!(e instanceof UsageError || e instanceof SettingsError)) throw e;
    err(`admission-guard check: ${e.message}`);
    return 2;
  }

  const load = (paths: string[]) =>
    loadManifests(paths, { cwd: io.cwd, readStdin: () => io.readStdin() });

  // The cluster snapshot: a broken one would make every verdict wrong, so it stops the run.
  const clusterFiles = await load(opts.clusterPaths);
  const clusterErrors = clusterFiles.flatMap(f => f.errors);
  if (clusterErrors.length) {
    for (const e of clusterErrors) err(`admission-guard check: --cluster ${e}`);
    return 2;
  }
  const files = await load(opts.inputs);
  const errors = files.flatMap(f => f.errors);
  for (const e of errors) err(`admission-guard check: ${e}`);

  const judged = await judgeFiles(files, {
    clusterObjects: clusterFiles.flatMap(f => f.objects.map(o => o.object)),
    settings,
    operation: opts.operation,
    namespace: opts.namespace,
    inspectImages: opts.inspectImages,
    io,
  });
  for (const e of judged.errors) err(`admission-guard check: ${e}`);
  const { results, cluster } = judged;

  // With --fix on stdin, stdout carries the fixed YAML, so the report moves to stderr.
  const fixesToStdout = opts.fix && files.some(f => f.file === STDIN);
  const report = fixesToStdout ? io.stderr : io.stdout;
  if (opts.output === "json") {
    for (const c of results) report.write(JSON.stringify(toJson(c)) + "\n");
  } else if (opts.output === "policyreport" || opts.output === "openreports") {
    const api = opts.output === "openreports" ? OPENREPORTS : WGPOLICYK8S;
    report.write(policyReportsYaml(results, { settings, cluster, policies: io.policies }, api));
  } else {
    const style = styleFor(Boolean(report.isTTY) && !io.env.NO_COLOR);
    for (const c of results.filter(c => c.review.handled)) report.write(textBlock(c, style) + "\n");
    report.write(textSummary(results, style) + "\n");
  }

  if (opts.fix) await writeFixes(files, results, io, line => report.write(line + "\n"));

  if (errors.length || judged.errors.length) return 2;
  return results.some(c => !c.review.allowed) ? 1 : 0;
}

async function writeFixes(
  files: ManifestFile[],
  results: Checked[],
  io: CliIO,
  note: (line: string) => unknown,
): Promise<void> {
  const reviewed = new Map<KubeObject, KubeObject>();
  for (const { input, review: r } of results) {
    if (r.object === input) continue;
    const committed = forCommit(r.object, input);
    if (!sameData(committed, input)) reviewed.set(input, committed);
  }
  for (const file of files) {
    const changed = file.objects.filter(o => reviewed.has(o.object)).length;
    if (file.errors.length) {
      if (changed || file.file === STDIN)
        note(`not fixed: ${file.file} (it has errors, see above)`);
      continue;
    }
    if (file.file === STDIN) {
      io.stdout.write(renderManifest(file, replaceObjects(file, reviewed)));
      continue;
    }
    if (!changed || !file.path) continue;
    await writeFile(file.path, renderManifest(file, replaceObjects(file, reviewed)));
    note(`fixed: ${file.file} (${changed} object${changed === 1 ? "" : "s"} changed)`);
  }
}
