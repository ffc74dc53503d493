// A small local STAND-IN for the Kubernetes API server, for end-to-end tests and the demo only.
// It is not Kubernetes: it serves just what the Pepr controller and admission-guard's own client
// calls need, from an in-memory store, over HTTPS on 127.0.0.1 (a throw-away CA, trusted through
// certificate-authority-data in the kubeconfig it writes). Served:
//
//   GET    .../<resource>/<name>                       one object (404 Status when missing)
//   GET    .../<resource>[?fieldSelector&labelSelector]  a List with metadata.resourceVersion
//   GET    .../<resource>?limit=n[&continue=token]       one page of a consistent snapshot taken at
//                                                      the first page (metadata.continue and
//                                                      remainingItemCount while more are left; an
//                                                      unknown or expired token: 410 Gone)
//   GET    .../<resource>?watch=true[&resourceVersion]   a chunked stream of ADDED/MODIFIED/DELETED
//                                                      events, held open (replays changes after the
//                                                      given resourceVersion, else ADDED for all;
//                                                      one too old: an ERROR 410 event). With
//                                                      allowWatchBookmarks, a BOOKMARK at the current
//                                                      resourceVersion once the replay is sent, then
//                                                      periodically; with timeoutSeconds, the stream
//                                                      ends after it
//   POST   .../<resource>                              create (409 when it exists); a Pod goes
//                                                      through the API server's built-in admission
//                                                      plugins first (./built-in-admission.ts; 403
//                                                      Forbidden with its message when they refuse)
//   PUT    .../<resource>/<name>                       replace
//   PATCH  .../<resource>/<name>                       application/apply-patch+yaml (server-side
//                                                      apply: create or deep-merge), merge-patch+json
//                                                      and strategic-merge-patch+json (both as RFC 7386
//                                                      merge), json-patch+json (RFC 6902)
//   DELETE .../<resource>/<name>                       delete
//   POST   /apis/authorization.k8s.io/v1/subjectaccessreviews   answered by an injectable function
//   GET    /api, /apis, /api/v1, /apis/<group>/<version>          discovery, from the table below
//
// Paths: /api/v1/... and /apis/<group>/<version>/..., namespaced as .../namespaces/<ns>/<resource>.
// Not served: admission webhooks, field managers/conflicts, status subresources, strategic-merge semantics
// for lists, defaulting, validation. Authentication and authorization only with
// `enforceRbac`: the kubeconfig's token is then a given identity (no token: system:anonymous) and
// every resource request is authorized, as the API server does it (./authorization.ts), by
// lib/cluster/rbac.ts from the Roles, ClusterRoles and bindings the stand-in stores; a denied request gets
// the API server's 403 Status. Non-resource requests (/healthz, /version, discovery) are allowed,
// as a cluster's system:discovery and system:public-info-viewer bindings allow them.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyPatch, deepClone, type Operation } from "fast-json-patch";
import { LATEST_POLICY_MINOR } from "../../capabilities/security-context/checks";
import { parse as parseYaml } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { RbacIndex, RBAC_KINDS } from "../../lib/cluster/rbac";
import {
  ANONYMOUS,
  applyCreate,
  forbiddenStatus,
  requestAttributes,
  type Identity,
  type RequestAttributes,
} from "./authorization";
import {
  admitPodBuiltIns,
  builtInCluster,
  validatePodBuiltIns,
  type BuiltInContext,
} from "./built-in-admission";
import { createTestCerts, type TestCerts } from "./certs";
import { kubeconfigYaml } from "./kubeconfig";
import { isRecord } from "../../lib/objects/record";

export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

const inGroup =
  (group: string, version = "v1") =>
  (kind: string, plural: string, namespaced = true): ResourceType => ({
    group,
    version,
    kind,
    plural,
    namespaced,
  });
const core = inGroup("");
const rbac = inGroup("rbac.authorization.k8s.io");
const apps = inGroup("apps");
const batch = inGroup("batch");

/** The resources served. Add more with `api.registerType`. */
export const RESOURCE_TYPES: ResourceType[] = [
  core("Namespace", "namespaces", false),
  core("Node", "nodes", false),
  core("Pod", "pods"),
  core("ResourceQuota", "resourcequotas"),
  core("LimitRange", "limitranges"),
  core("ServiceAccount", "serviceaccounts"),
  core("Secret", "secrets"),
  core("ConfigMap", "configmaps"),
  rbac("Role", "roles"),
  rbac("RoleBinding", "rolebindings"),
  rbac("ClusterRole", "clusterroles", false),
  rbac("ClusterRoleBinding", "clusterrolebindings", false),
  apps("Deployment", "deployments"),
  apps("StatefulSet", "statefulsets"),
  apps("DaemonSet", "daemonsets"),
  apps("ReplicaSet", "replicasets"),
  batch("Job", "jobs"),
  batch("CronJob", "cronjobs"),
  core("Event", "events"),
  inGroup("pepr.dev")("PeprStore", "peprstores"),
  inGroup("admission-guard.dev", "v1alpha1")("Exemption", "exemptions"),
  inGroup("wgpolicyk8s.io", "v1alpha2")("PolicyReport", "policyreports"),
  // OpenReports (reports.api openreports, both, auto): a namespaced Report, a cluster one.
  inGroup("openreports.io", "v1alpha1")("Report", "reports"),
  inGroup("openreports.io", "v1alpha1")("ClusterReport", "clusterreports", false),
  inGroup("apiextensions.k8s.io")("CustomResourceDefinition", "customresourcedefinitions", false),
  inGroup("authorization.k8s.io")("SubjectAccessReview", "subjectaccessreviews", false),
  inGroup("admissionregistration.k8s.io")(
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    false,
  ),
  inGroup("admissionregistration.k8s.io")(
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    false,
  ),
  inGroup("discovery.k8s.io")("EndpointSlice", "endpointslices"),
  // What the Priority admission plugin resolves priorityClassName with (./built-in-admission.ts).
  inGroup("scheduling.k8s.io")("PriorityClass", "priorityclasses", false),
  // KServe's runtimes, which an InferenceService's model container is built from.
  inGroup("serving.kserve.io", "v1alpha1")("ServingRuntime", "servingruntimes"),
  inGroup("serving.kserve.io", "v1alpha1")(
    "ClusterServingRuntime",
    "clusterservingruntimes",
    false,
  ),
];

const apiVersionOf = (t: ResourceType) => (t.group ? `${t.group}/${t.version}` : t.version);
const typeKey = (t: ResourceType) => `${t.group}/${t.version}/${t.plural}`;

/** What a SubjectAccessReview gets back. Default: not allowed (like a cluster without a binding). */
export type AccessReviewer = (
  review: KubeObject,
  api: StandInApi,
) => { allowed: boolean; reason?: string } | Promise<{ allowed: boolean; reason?: string }>;

export interface RecordedRequest {
  method: string;
  /** Path with query string, e.g. `/api/v1/namespaces?watch=true&resourceVersion=3`. */
  path: string;
  contentType?: string;
  /** Parsed body of POST/PUT/PATCH requests. */
  body?: unknown;
  /**
   * With `enforceRbac`: each authorization check made, in order, with its answer (two for a
   * server-side apply that creates: patch, then create). Absent for non-resource requests.
   */
  access?: (RequestAttributes & { allowed: boolean })[];
  /** With `enforceRbac`: the message of the 403 the request got. */
  forbidden?: string;
}

export interface StandInOptions {
  /** Objects present from the start (any kind of the table). */
  objects?: KubeObject[];
  accessReview?: AccessReviewer;
  /** Serve plain HTTP instead of HTTPS (the kubeconfig then says insecure-skip-tls-verify). */
  http?: boolean;
  /** Certificates to serve with; fresh ones by default. */
  certs?: TestCerts;
  /**
   * Authenticate the kubeconfig's token as this identity and authorize every resource request with
   * RBAC from the stored Roles, ClusterRoles and bindings (403 when not allowed). Default: no
   * authentication, everything allowed.
   */
  enforceRbac?: Identity;
  /**
   * Changes kept for watches that resume from a resourceVersion (default 10,000); a watch from an
   * older one gets 410 Gone. A benchmark with heavy churn and long lists keeps more.
   */
  eventLogLimit?: number;
  /** How often an open watch that asked for bookmarks gets one (default 60 s, as the API server). */
  bookmarkIntervalMs?: number;
  /** Group versions of the table not served (their CRDs not installed): "openreports.io/v1alpha1". */
  notServed?: string[];
}

export interface StandInApi {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  /** A kubeconfig pointing at the stand-in: give it to the controller as KUBECONFIG. */
  readonly kubeconfigPath: string;
  readonly certs: TestCerts;
  /** Every request received, in order. */
  readonly requests: RecordedRequest[];
  /** Create or replace an object (emits ADDED or MODIFIED to watchers); returns the stored copy. */
  put(obj: KubeObject): KubeObject;
  /** Delete an object (emits DELETED); false when it did not exist. */
  remove(kind: string, name: string, namespace?: string): boolean;
  get(kind: string, name: string, namespace?: string): KubeObject | undefined;
  list(kind: string, namespace?: string): KubeObject[];
  /** Every stored object (for a SnapshotCluster of the same cluster). */
  objects(): KubeObject[];
  /** Open watch streams on a kind (optionally only those of a namespace-scoped watch). */
  watching(kind: string): number;
  /** Delay every response by ms (watch events excepted). */
  setLatency(ms: number): void;
  /** Delay lists of one resource (its plural: "namespaces") by ms, as a slow first list. */
  holdLists(plural: string, ms: number): void;
  /** The list requests (pages) received for one resource (its plural), watches excepted. */
  listRequests(plural: string): RecordedRequest[];
  /**
   * As etcd's compaction: the change log and every list snapshot are dropped, so a watch from an
   * earlier resourceVersion and a continue token issued before get 410 Gone.
   */
  compact(): void;
  /** Open watches of a kind get an ERROR 410 (Expired) event and are closed: their clients list again. */
  expireWatches(kind: string): void;
  /** Open watches of a kind end normally (as at their timeout): their clients resume from their resourceVersion. */
  endWatches(kind: string): void;
  /** true: close every open connection and every new one at once (an unreachable API server). */
  setDown(down: boolean): void;
  setAccessReview(reviewer: AccessReviewer): void;
  registerType(type: ResourceType): void;
  stop(): Promise<void>;
}

interface Route {
  type: ResourceType;
  namespace?: string;
  name?: string;
}

interface Watcher {
  key: string;
  namespace?: string;
  matches: (obj: KubeObject) => boolean;
  res: ServerResponse;
}

/** The items of a paged list, as they were at its first page; pages are served from it. */
interface ListSnapshot {
  id: number;
  /** The resource and namespace listed: a token is valid for that collection only. */
  scope: string;
  items: KubeObject[];
  rv: number;
  takenAt: number;
}

interface ChangeEvent {
  rv: number;
  key: string;
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: KubeObject;
}

/** Changes kept for watches that resume from a resourceVersion; older ones get 410 Gone. */
const EVENT_LOG_LIMIT = 10_000;
/** A paged list's snapshot is kept this long after its first page (etcd compacts every 5 minutes). */
const SNAPSHOT_TTL_MS = 5 * 60_000;
/** Paged lists in progress at once; the oldest is dropped beyond (its token then gets 410). */
const MAX_SNAPSHOTS = 100;
const EXPIRED_CONTINUE =
  "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

class HttpError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    /** The Status to answer, when it carries more than code, reason and message. */
    readonly body?: object,
  ) {
    super(message);
  }
}

/** The bearer token of the kubeconfig the stand-in writes. */
const TOKEN = "stand-in-token";

/** RFC 7386 JSON merge patch; also what server-side apply does here (without null deletes). */
function mergePatch(target: unknown, patch: unknown, deleteNulls = true): unknown {
  if (!isRecord(patch)) return deepClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null && deleteNulls) delete out[k];
    else out[k] = mergePatch(out[k], v, deleteNulls);
  }
  return out;
}

/** `a=b,c!=d,e,!f` (equality-based selectors only). */
function labelMatcher(selector: string | null): (obj: KubeObject) => boolean {
  if (!selector) return () => true;
  const terms = selector.split(",").map(t => t.trim());
  return obj => {
    const labels = obj.metadata?.labels ?? {};
    return terms.every(term => {
      if (term.startsWith("!")) return !(term.slice(1) in labels);
      const ne = term.split("!=");
      if (ne.length === 2) return labels[ne[0]] !== ne[1];
      const eq = term.split(/==?/);
      if (eq.length === 2) return labels[eq[0]] === eq[1];
      return term in labels;
    });
  };
}

/** `metadata.name=x,metadata.namespace=y`. */
function fieldMatcher(selector: string | null): (obj: KubeObject) => boolean {
  if (!selector) return () => true;
  const terms = selector.split(",").map(t => t.split("="));
  return obj =>
    terms.every(([field, value]) => {
      if (field === "metadata.name") return obj.metadata?.name === value;
      if (field === "metadata.namespace") return obj.metadata?.namespace === value;
      return true;
    });
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** JSON first (what clients send), YAML (a superset) when it is not JSON. */
function parseJsonOrYaml(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return parseYaml(raw);
  }
}

function status(code: number, reason: string, message: string) {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
}

export async function startStandIn(options: StandInOptions = {}): Promise<StandInApi> {
  const types = RESOURCE_TYPES.filter(t => !options.notServed?.includes(apiVersionOf(t)));
  const certs = options.certs ?? createTestCerts();
  const store = new Map<string, KubeObject>(); // typeKey|namespace|name → object
  // The same objects per resource (typeKey): a list reads its own kind only.
  const byType = new Map<string, Map<string, KubeObject>>();
  let events: ChangeEvent[] = [];
  const eventLogLimit = options.eventLogLimit ?? EVENT_LOG_LIMIT;
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 60_000;
  const snapshots = new Map<number, ListSnapshot>();
  let lastSnapshotId = 0;
  const watchers = new Set<Watcher>();
  const sockets = new Set<Socket>();
  const requests: RecordedRequest[] = [];
  let resourceVersion = 1;
  /** Changes up to this resourceVersion were dropped from the log: older watches get 410. */
  let droppedThrough = 0;
  let latency = 0;
  const listHolds = new Map<string, number>();
  let down = false;
  let accessReview: AccessReviewer = options.accessReview ?? (() => ({ allowed: false }));
  /** The stored RBAC objects, indexed again whenever anything changed (resourceVersion moved). */
  let rbacIndex: { rv: number; index: RbacIndex } | undefined;

  const storeKey = (t: ResourceType, namespace: string | undefined, name: string) =>
    `${typeKey(t)}|${t.namespaced ? (namespace ?? "") : ""}|${name}`;

  function typeOf(kind: string, apiVersion?: string): ResourceType {
    const t =
      types.find(x => x.kind === kind && (!apiVersion || apiVersionOf(x) === apiVersion)) ??
      types.find(x => x.kind === kind);
    if (!t) throw new Error(`stand-in API: unknown kind ${kind} (registerType it first)`);
    return t;
  }

  function notify(type: ChangeEvent["type"], t: ResourceType, object: KubeObject, rv: number) {
    const key = typeKey(t);
    events.push({ rv, key, type, object });
    // Trimmed a tenth at a time: one splice per change would move the whole log each time.
    if (events.length > eventLogLimit + Math.ceil(eventLogLimit / 10))
      droppedThrough = events.splice(0, events.length - eventLogLimit).pop()!.rv;
    for (const w of watchers) if (w.key === key && w.matches(object)) writeEvent(w, type, object);
  }

  function writeEvent(w: Watcher, type: string, object: KubeObject) {
    if (w.res.destroyed || w.res.writableEnded) watchers.delete(w);
    else w.res.write(JSON.stringify({ type, object }) + "\n");
  }

  /** Stores an object: fills uid, creationTimestamp, a new resourceVersion; notifies watchers. */
  function save(t: ResourceType, obj: KubeObject, existing?: KubeObject): KubeObject {
    const rv = ++resourceVersion;
    const meta = { ...(obj.metadata ?? {}) };
    meta.uid = existing?.metadata?.uid ?? meta.uid ?? randomUUID();
    meta.creationTimestamp =
      existing?.metadata?.creationTimestamp ??
      meta.creationTimestamp ??
      (new Date().toISOString() as unknown as Date);
    meta.resourceVersion = String(rv);
    if (!t.namespaced) delete meta.namespace;
    const stored: KubeObject = {
      ...obj,
      apiVersion: apiVersionOf(t),
      kind: t.kind,
      metadata: meta,
    };
    const key = storeKey(t, meta.namespace, meta.name ?? "");
    store.set(key, stored);
    let ofType = byType.get(typeKey(t));
    if (!ofType) byType.set(typeKey(t), (ofType = new Map()));
    ofType.set(key, stored);
    notify(existing ? "MODIFIED" : "ADDED", t, stored, rv);
    return stored;
  }

  function del(t: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const key = storeKey(t, namespace, name);
    const existing = store.get(key);
    if (!existing) throw new HttpError(404, "NotFound", `${t.plural} "${name}" not found`);
    store.delete(key);
    byType.get(typeKey(t))?.delete(key);
    const rv = ++resourceVersion;
    const gone = { ...existing, metadata: { ...existing.metadata, resourceVersion: String(rv) } };
    notify("DELETED", t, gone, rv);
    return gone;
  }

  function itemsOf(t: ResourceType, namespace?: string): KubeObject[] {
    const all = [...(byType.get(typeKey(t))?.values() ?? [])];
    return namespace ? all.filter(o => o.metadata?.namespace === namespace) : all;
  }

  /**
   * One page of a paged list. The first page takes a snapshot of the collection (the objects are
   * never changed in place: a change stores a new one), later pages are served from it, so every
   * page is of the first page's resourceVersion, as etcd serves them.
   */
  function listPage(r: Route, query: URLSearchParams) {
    const now = Date.now();
    for (const [id, s] of snapshots) if (now - s.takenAt > SNAPSHOT_TTL_MS) snapshots.delete(id);
    const scope = `${typeKey(r.type)}|${r.namespace ?? ""}`;
    const limit = Number(query.get("limit"));
    const size = Number.isInteger(limit) && limit > 0 ? limit : Infinity;
    const token = query.get("continue");
    let snapshot: ListSnapshot | undefined;
    let offset = 0;
    if (token) {
      const m = /^(\d+):(\d+)$/.exec(Buffer.from(token, "base64url").toString());
      snapshot = m ? snapshots.get(Number(m[1])) : undefined;
      offset = m ? Number(m[2]) : 0;
      if (!snapshot || snapshot.scope !== scope || snapshot.rv < droppedThrough)
        throw new HttpError(410, "Expired", EXPIRED_CONTINUE);
    } else {
      const fields = fieldMatcher(query.get("fieldSelector"));
      const labels = labelMatcher(query.get("labelSelector"));
      const items = itemsOf(r.type, r.namespace).filter(o => fields(o) && labels(o));
      snapshot = { id: ++lastSnapshotId, scope, items, rv: resourceVersion, takenAt: now };
    }
    const items = snapshot.items.slice(offset, offset + size);
    const next = offset + items.length;
    const metadata: Record<string, unknown> = { resourceVersion: String(snapshot.rv) };
    if (next < snapshot.items.length) {
      snapshots.set(snapshot.id, snapshot);
      while (snapshots.size > MAX_SNAPSHOTS) snapshots.delete(snapshots.keys().next().value!);
      metadata.continue = Buffer.from(`${snapshot.id}:${next}`).toString("base64url");
      metadata.remainingItemCount = snapshot.items.length - next;
    } else snapshots.delete(snapshot.id);
    return { apiVersion: apiVersionOf(r.type), kind: `${r.type.kind}List`, metadata, items };
  }

  function route(pathname: string): Route | undefined {
    const seg = pathname.split("/").filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (seg[0] === "api" && seg[1] === "v1") [group, version, rest] = ["", "v1", seg.slice(2)];
    else if (seg[0] === "apis" && seg.length >= 3)
      [group, version, rest] = [seg[1], seg[2], seg.slice(3)];
    else return undefined;
    let namespace: string | undefined;
    if (rest[0] === "namespaces" && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, subresource] = rest;
    const type = types.find(t => t.group === group && t.version === version && t.plural === plural);
    if (!type || subresource || (namespace && !type.namespaced)) return undefined;
    return { type, namespace, name };
  }

  function discovery(pathname: string): unknown {
    if (pathname === "/api") return { kind: "APIVersions", versions: ["v1"] };
    if (pathname === "/apis") {
      const groups = [...new Set(types.filter(t => t.group).map(t => `${t.group}/${t.version}`))];
      return {
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: groups.map(gv => {
          const [name, version] = gv.split("/");
          const v = { groupVersion: gv, version };
          return { name, versions: [v], preferredVersion: v };
        }),
      };
    }
    const gv = pathname === "/api/v1" ? "v1" : pathname.replace(/^\/apis\//, "");
    const resources = types.filter(t => apiVersionOf(t) === gv);
    if (!resources.length || !/^\/api(s)?\//.test(pathname)) return undefined;
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: gv,
      resources: resources.map(t => ({
        name: t.plural,
        singularName: t.kind.toLowerCase(),
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
      })),
    };
  }

  function parseBody(raw: string, contentType: string): unknown {
    if (!raw) return undefined;
    try {
      if (!contentType.includes("yaml")) return JSON.parse(raw);
      // Clients send server-side apply bodies as JSON (which is YAML): parsing them with the yaml
      // package costs ~350 ms for a 400 KB PolicyReport, and the benchmark measured that instead.
      return parseJsonOrYaml(raw);
    } catch (e) {
      throw new HttpError(400, "BadRequest", `cannot parse body: ${(e as Error).message}`);
    }
  }

  function openWatch(r: Route, query: URLSearchParams, res: ServerResponse) {
    const fields = fieldMatcher(query.get("fieldSelector"));
    const labels = labelMatcher(query.get("labelSelector"));
    const key = typeKey(r.type);
    const w: Watcher = {
      key,
      namespace: r.namespace,
      matches: o =>
        (!r.namespace || o.metadata?.namespace === r.namespace) && fields(o) && labels(o),
      res,
    };
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    // Send the headers now: clients consider the watch established only when they arrive.
    res.flushHeaders();
    const since = Number(query.get("resourceVersion") || 0);
    if (since > 0) {
      if (since < droppedThrough) {
        writeEvent(w, "ERROR", status(410, "Expired", `too old resource version: ${since}`));
        res.end();
        return;
      }
      for (const e of events)
        if (e.rv > since && e.key === key && w.matches(e.object)) writeEvent(w, e.type, e.object);
    } else {
      for (const o of itemsOf(r.type, r.namespace)) if (w.matches(o)) writeEvent(w, "ADDED", o);
    }
    watchers.add(w);
    const timers: NodeJS.Timeout[] = [];
    if (query.get("allowWatchBookmarks") === "true") {
      // Everything up to the current resourceVersion has been sent: the client may resume from it.
      const bookmark = () =>
        writeEvent(w, "BOOKMARK", {
          apiVersion: apiVersionOf(r.type),
          kind: r.type.kind,
          metadata: { resourceVersion: String(resourceVersion) },
        });
      bookmark();
      timers.push(setInterval(bookmark, bookmarkIntervalMs).unref());
    }
    const timeoutSeconds = Number(query.get("timeoutSeconds"));
    if (timeoutSeconds > 0) timers.push(setTimeout(() => res.end(), timeoutSeconds * 1000).unref());
    res.on("close", () => {
      watchers.delete(w);
      for (const t of timers) clearTimeout(t);
    });
  }

  /** Who made the request: the kubeconfig's token is `enforceRbac`'s identity, no token anonymous. */
  function authenticate(req: IncomingMessage, identity: Identity): Identity {
    const header = req.headers.authorization;
    if (!header) return ANONYMOUS;
    if (header === `Bearer ${TOKEN}`) return identity;
    throw new HttpError(401, "Unauthorized", "Unauthorized");
  }

  /** One RBAC check, recorded on the request; throws the API server's 403 when not allowed. */
  function authorize(who: Identity, attrs: RequestAttributes, record: RecordedRequest): void {
    if (rbacIndex?.rv !== resourceVersion) {
      const objects = RBAC_KINDS.flatMap(kind => itemsOf(typeOf(kind)));
      rbacIndex = { rv: resourceVersion, index: new RbacIndex(objects) };
    }
    const allowed = rbacIndex.index.decide({ ...who, ...attrs }).allowed;
    (record.access ??= []).push({ ...attrs, allowed });
    if (allowed) return;
    const forbidden = forbiddenStatus(who, attrs);
    record.forbidden = forbidden.message;
    throw new HttpError(403, "Forbidden", forbidden.message, forbidden);
  }

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://stand-in");
    const method = req.method ?? "GET";
    const contentType = req.headers["content-type"] ?? "";
    const raw = await readBody(req);
    const record: RecordedRequest = { method, path: url.pathname + url.search, contentType };
    requests.push(record);
    if (latency) await sleep(latency);

    const send = (code: number, body: unknown) => {
      res.writeHead(code, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    try {
      // The API server authenticates and authorizes before it reads the body or routes the request.
      const who = options.enforceRbac && authenticate(req, options.enforceRbac);
      const attrs = who ? requestAttributes(method, url) : undefined;
      if (who && attrs) authorize(who, attrs, record);
      const body = parseBody(raw, contentType);
      record.body = body;
      if (method === "GET" && url.pathname === "/healthz") return void res.end("ok");
      // The newest Pod Security policy the module knows: the controller evaluates "latest" as
      // the API server's version, and e2e cases (and their parity with `check`) expect it.
      if (method === "GET" && url.pathname === "/version")
        return send(200, {
          major: "1",
          minor: String(LATEST_POLICY_MINOR),
          gitVersion: `v1.${LATEST_POLICY_MINOR}.0-stand-in`,
        });
      const r = route(url.pathname);
      if (!r) {
        const d = method === "GET" ? discovery(url.pathname) : undefined;
        if (d) return send(200, d);
        throw new HttpError(
          404,
          "NotFound",
          `the stand-in API does not serve ${method} ${url.pathname}`,
        );
      }
      const { type } = r;
      const hold = listHolds.get(type.plural);
      if (
        hold &&
        method === "GET" &&
        r.name === undefined &&
        url.searchParams.get("watch") !== "true"
      )
        await sleep(hold);
      if (type.kind === "SubjectAccessReview") {
        if (method !== "POST") throw new HttpError(405, "MethodNotAllowed", "create only");
        const review = (body ?? {}) as KubeObject;
        return send(201, { ...review, status: await accessReview(review, api) });
      }
      const key = r.name !== undefined ? storeKey(type, r.namespace, r.name) : undefined;
      const existing = key ? store.get(key) : undefined;
      const notFound = () => new HttpError(404, "NotFound", `${type.plural} "${r.name}" not found`);
      const withPathIdentity = (obj: unknown): KubeObject => {
        if (!isRecord(obj)) throw new HttpError(400, "BadRequest", "the body must be an object");
        const o = obj as KubeObject;
        const meta = { ...(o.metadata ?? {}) };
        if (r.name) meta.name = r.name;
        if (r.namespace) meta.namespace = r.namespace;
        if (!meta.name && meta.generateName)
          meta.name = meta.generateName + randomUUID().slice(0, 5);
        if (!meta.name) throw new HttpError(422, "Invalid", "metadata.name: Required value");
        if (type.namespaced && !meta.namespace)
          throw new HttpError(422, "Invalid", "metadata.namespace: Required value");
        return { ...o, metadata: meta };
      };

      switch (method) {
        case "GET":
          if (r.name !== undefined) return existing ? send(200, existing) : send(404, notFound());
          if (url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1")
            return openWatch(r, url.searchParams, res);
          if (url.searchParams.get("limit") || url.searchParams.get("continue"))
            return send(200, listPage(r, url.searchParams));
          {
            const fields = fieldMatcher(url.searchParams.get("fieldSelector"));
            const labels = labelMatcher(url.searchParams.get("labelSelector"));
            return send(200, {
              apiVersion: apiVersionOf(type),
              kind: `${type.kind}List`,
              metadata: { resourceVersion: String(resourceVersion) },
              items: itemsOf(type, r.namespace).filter(o => fields(o) && labels(o)),
            });
          }
        case "POST": {
          if (r.name !== undefined)
            throw new HttpError(405, "MethodNotAllowed", "POST to a collection");
          const obj = withPathIdentity(body);
          const k = storeKey(type, obj.metadata?.namespace, obj.metadata!.name!);
          if (store.has(k))
            throw new HttpError(
              409,
              "AlreadyExists",
              `${type.plural} "${obj.metadata!.name}" already exists`,
            );
          if (type.kind === "Pod" && !type.group) {
            // The built-in admission a created Pod gets (no webhooks here: nothing patches it).
            const pod = deepClone(obj) as KubeObject;
            const ctx: BuiltInContext = {
              namespace: pod.metadata!.namespace!,
              cluster: builtInCluster(api),
            };
            const refusal = admitPodBuiltIns(pod, ctx) ?? validatePodBuiltIns(pod, ctx);
            if (refusal) throw new HttpError(403, "Forbidden", refusal);
            return send(201, save(type, pod));
          }
          return send(201, save(type, obj));
        }
        case "PUT":
          if (!existing) throw notFound();
          return send(200, save(type, withPathIdentity(body), existing));
        case "PATCH": {
          if (r.name === undefined)
            throw new HttpError(405, "MethodNotAllowed", "PATCH needs a name");
          if (contentType.startsWith("application/apply-patch")) {
            // Creating by apply needs create too (for this name), checked once it is known missing.
            if (!existing && who && attrs) authorize(who, applyCreate(attrs), record);
            const merged = mergePatch(existing ?? {}, body, false);
            return send(existing ? 200 : 201, save(type, withPathIdentity(merged), existing));
          }
          if (!existing) throw notFound();
          let patched: unknown;
          if (contentType.startsWith("application/json-patch+json")) {
            try {
              patched = applyPatch(deepClone(existing), body as Operation[], true).newDocument;
            } catch (e) {
              throw new HttpError(422, "Invalid", `json patch: ${(e as Error).message}`);
            }
          } else {
            patched = mergePatch(existing, body);
          }
          return send(200, save(type, withPathIdentity(patched), existing));
        }
        case "DELETE":
          if (r.name === undefined)
            throw new HttpError(405, "MethodNotAllowed", "DELETE needs a name");
          return send(200, del(type, r.namespace, r.name));
        default:
          throw new HttpError(405, "MethodNotAllowed", `${method} not served`);
      }
    } catch (e) {
      const err = e instanceof HttpError ? e : new HttpError(500, "InternalError", String(e));
      if (!res.headersSent) send(err.code, err.body ?? status(err.code, err.reason, err.message));
    }
  }

  const handler = (req: IncomingMessage, res: ServerResponse) => void serve(req, res);
  const server = options.http
    ? createHttpServer(handler)
    : createHttpsServer({ key: certs.keyPem, cert: certs.certPem }, handler);
  server.on("connection", (socket: Socket) => {
    if (down) return void socket.destroy();
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>(resolve => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const url = `${options.http ? "http" : "https"}://127.0.0.1:${port}`;

  const dir = mkdtempSync(join(tmpdir(), "admission-guard-stand-in-"));
  const kubeconfigPath = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfigPath,
    kubeconfigYaml(url, options.http ? undefined : certs.caPem, { token: TOKEN }),
  );

  const api: StandInApi = {
    url,
    kubeconfigPath,
    certs,
    requests,
    put(obj) {
      const t = typeOf(String(obj.kind), obj.apiVersion);
      const existing = store.get(storeKey(t, obj.metadata?.namespace, obj.metadata?.name ?? ""));
      return save(t, deepClone(obj), existing);
    },
    remove(kind, name, namespace) {
      try {
        del(typeOf(kind), namespace, name);
        return true;
      } catch {
        return false;
      }
    },
    get(kind, name, namespace) {
      return store.get(storeKey(typeOf(kind), namespace, name));
    },
    list(kind, namespace) {
      return itemsOf(typeOf(kind), namespace);
    },
    objects() {
      return [...store.values()];
    },
    watching(kind) {
      const key = typeKey(typeOf(kind));
      return [...watchers].filter(w => w.key === key).length;
    },
    setLatency(ms) {
      latency = ms;
    },
    holdLists(plural: string, ms: number) {
      listHolds.set(plural, ms);
    },
    listRequests(plural) {
      return requests.filter(r => {
        if (r.method !== "GET") return false;
        const url = new URL(r.path, "http://stand-in");
        const w = url.searchParams.get("watch");
        return url.pathname.endsWith(`/${plural}`) && w !== "true" && w !== "1";
      });
    },
    compact() {
      droppedThrough = resourceVersion;
      events = [];
      snapshots.clear();
    },
    expireWatches(kind) {
      const key = typeKey(typeOf(kind));
      for (const w of [...watchers].filter(x => x.key === key)) {
        writeEvent(w, "ERROR", status(410, "Expired", "too old resource version"));
        w.res.end();
        watchers.delete(w);
      }
    },
    endWatches(kind) {
      const key = typeKey(typeOf(kind));
      for (const w of [...watchers].filter(x => x.key === key)) {
        w.res.end();
        watchers.delete(w);
      }
    },
    setDown(value) {
      down = value;
      if (!down) return;
      for (const w of watchers) w.res.destroy();
      watchers.clear();
      for (const s of sockets) s.destroy();
    },
    setAccessReview(reviewer) {
      accessReview = reviewer;
    },
    registerType(type) {
      types.push(type);
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>(resolve => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
      if (!options.certs) rmSync(certs.dir, { recursive: true, force: true });
    },
  };
  for (const obj of options.objects ?? []) api.put(obj);
  return api;
}
