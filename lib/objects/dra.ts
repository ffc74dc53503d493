// Dynamic Resource Allocation (resource.k8s.io) as the rules read it: ResourceClaimTemplates,
// DeviceClasses and ResourceSlices reduced, as each object arrives, to what quota and node fit need
// (the live caches and the snapshot apply the same projections, so the webhook and `check` agree).
// Pure. Versions: v1beta1 (1.32) writes a request's class and count on the request itself; v1beta2
// (1.33) and v1 (1.34) under `exactly`; `firstAvailable` (1.33+) lists alternatives in both.
import { isRecord } from "./record";

export const DRA_GROUP = "resource.k8s.io";
/** Tried in this order: the newest the API server serves wins. */
export const DRA_VERSIONS = ["v1", "v1beta2", "v1beta1"] as const;

/** The most devices one allocation holds (resourceapi.AllocationResultsMaxSize): what `All` counts. */
export const ALL_DEVICES = 32;
/** Requests per claim and alternatives per request the API server accepts at most. */
const MAX_REQUESTS = 32;
const MAX_ALTERNATIVES = 8;

/** One way a request may be met: a class, and how many of its devices. */
export interface DeviceAsk {
  deviceClassName: string;
  /** ExactCount, All, or a mode this version does not know (counted as 0, as the evaluator does). */
  mode: string;
  /** Devices counted against quota: `count` (default 1) for ExactCount, 32 for All, else 0. */
  devices: number;
}

export interface DeviceRequestAsRead {
  name: string;
  /** Where it is written in the template ("spec.spec.devices.requests[0]"). */
  field: string;
  /** A plain request; undefined for a firstAvailable one. */
  exactly?: DeviceAsk;
  /** Its alternatives, in order (the first that can be allocated is). */
  firstAvailable?: DeviceAsk[];
}

/** A ResourceClaimTemplate as kept: its name and its claim's device requests. */
export interface ClaimTemplateAsRead {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; namespace?: string; resourceVersion?: string };
  requests: DeviceRequestAsRead[];
}

/** A DeviceClass as kept: the one driver its selectors pick, when that is all they do. */
export interface DeviceClassAsRead {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; resourceVersion?: string };
  /**
   * The driver every selector requires (`device.driver == "gpu.example.com"`); undefined when the
   * selectors say anything else (no selector: any driver's devices), which is not evaluated here.
   */
  driver?: string;
}

/** A ResourceSlice as kept: whose devices, where, how many. */
export interface SliceAsRead {
  apiVersion?: string;
  kind?: string;
  metadata: { name?: string; resourceVersion?: string };
  driver: string;
  pool: string;
  generation: number;
  /** The node whose devices these are; undefined for devices reachable from several nodes. */
  node?: string;
  devices: number;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);
const nonNegative = (v: unknown, fallback: number): number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : fallback;

/** One request's class and count (v1beta1 on the request, v1/v1beta2 under `exactly`). */
function askOf(raw: unknown): DeviceAsk | undefined {
  if (!isRecord(raw)) return undefined;
  const deviceClassName = str(raw.deviceClassName);
  if (!deviceClassName) return undefined;
  const mode = str(raw.allocationMode) ?? "ExactCount";
  const devices =
    mode === "ExactCount" ? nonNegative(raw.count, 1) : mode === "All" ? ALL_DEVICES : 0;
  return { deviceClassName, mode, devices };
}

/** The device requests of a claim spec (`{devices: {requests: [...]}}`), under `base`. */
export function deviceRequestsOf(claimSpec: unknown, base: string): DeviceRequestAsRead[] {
  const devices = isRecord(claimSpec) && isRecord(claimSpec.devices) ? claimSpec.devices : {};
  const raw = Array.isArray(devices.requests) ? devices.requests.slice(0, MAX_REQUESTS) : [];
  const out: DeviceRequestAsRead[] = [];
  raw.forEach((r, i) => {
    if (!isRecord(r)) return;
    const field = `${base}.devices.requests[${i}]`;
    const name = str(r.name) ?? `#${i}`;
    if (Array.isArray(r.firstAvailable) && r.firstAvailable.length) {
      const alternatives = r.firstAvailable
        .slice(0, MAX_ALTERNATIVES)
        .map(askOf)
        .filter((a): a is DeviceAsk => !!a);
      if (alternatives.length) out.push({ name, field, firstAvailable: alternatives });
      return;
    }
    const exactly = askOf(isRecord(r.exactly) ? r.exactly : r);
    if (exactly)
      out.push({ name, field: isRecord(r.exactly) ? `${field}.exactly` : field, exactly });
  });
  return out;
}

export function claimTemplateAsRead(obj: unknown): ClaimTemplateAsRead {
  const o = isRecord(obj) ? obj : {};
  const metadata = isRecord(o.metadata) ? o.metadata : {};
  const spec = isRecord(o.spec) ? o.spec : {};
  return {
    apiVersion: str(o.apiVersion),
    kind: str(o.kind),
    metadata: {
      name: str(metadata.name),
      namespace: str(metadata.namespace),
      resourceVersion: str(metadata.resourceVersion),
    },
    requests: deviceRequestsOf(spec.spec, "spec.spec"),
  };
}

// `device.driver == "x"` (either side, either quote): the one selector evaluated exactly.
const DRIVER_SELECTOR = [
  /^\s*device\.driver\s*==\s*"([^"\\]+)"\s*$/,
  /^\s*device\.driver\s*==\s*'([^'\\]+)'\s*$/,
  /^\s*"([^"\\]+)"\s*==\s*device\.driver\s*$/,
  /^\s*'([^'\\]+)'\s*==\s*device\.driver\s*$/,
];

/** The driver a CEL expression requires, when that is exactly what it says. */
export function driverOfSelector(expression: unknown): string | undefined {
  if (typeof expression !== "string" || expression.length > 1024) return undefined;
  for (const re of DRIVER_SELECTOR) {
    const m = re.exec(expression);
    if (m) return m[1];
  }
  return undefined;
}

export function deviceClassAsRead(obj: unknown): DeviceClassAsRead {
  const o = isRecord(obj) ? obj : {};
  const metadata = isRecord(o.metadata) ? o.metadata : {};
  const spec = isRecord(o.spec) ? o.spec : {};
  const selectors = Array.isArray(spec.selectors) ? spec.selectors : [];
  // Selectors are ANDed: every one must name the same driver for the class to be that driver's.
  const drivers = new Set(
    selectors.map(s =>
      isRecord(s) && isRecord(s.cel) ? driverOfSelector(s.cel.expression) : undefined,
    ),
  );
  const driver = selectors.length && drivers.size === 1 ? [...drivers][0] : undefined;
  return {
    apiVersion: str(o.apiVersion),
    kind: str(o.kind),
    metadata: { name: str(metadata.name), resourceVersion: str(metadata.resourceVersion) },
    ...(driver ? { driver } : {}),
  };
}

export function sliceAsRead(obj: unknown): SliceAsRead {
  const o = isRecord(obj) ? obj : {};
  const metadata = isRecord(o.metadata) ? o.metadata : {};
  const spec = isRecord(o.spec) ? o.spec : {};
  const pool = isRecord(spec.pool) ? spec.pool : {};
  // Only a slice with nodeName is one node's; allNodes, nodeSelector or per-device node selection
  // make its devices reachable from several nodes.
  const node = str(spec.nodeName);
  return {
    apiVersion: str(o.apiVersion),
    kind: str(o.kind),
    metadata: { name: str(metadata.name), resourceVersion: str(metadata.resourceVersion) },
    driver: str(spec.driver) ?? "",
    pool: str(pool.name) ?? "",
    generation: nonNegative(pool.generation, 0),
    ...(node && spec.perDeviceNodeSelection !== true ? { node } : {}),
    devices: Array.isArray(spec.devices) ? spec.devices.length : 0,
  };
}

/** Of one driver: the most devices a single node's slices offer, and where. */
export interface DriverCapacity {
  most: number;
  /** A node that offers `most` (the first by name). */
  node?: string;
  /** Nodes with any device of the driver. */
  nodes: number;
  /** Some of its devices are reachable from several nodes (not node-local): not judged. */
  shared: boolean;
}

/** Devices per driver on the nodes, from ResourceSlices: what node fit reads. */
export type DeviceCapacity = Map<string, DriverCapacity>;

/**
 * The per-node device count of every driver, from slices: only a pool's newest generation counts
 * (older slices are being replaced). Computed once per slice list, not per request.
 */
export function deviceCapacity(slices: readonly SliceAsRead[]): DeviceCapacity {
  const newest = new Map<string, number>();
  for (const s of slices) {
    const pool = `${s.driver}\u0000${s.pool}`;
    newest.set(pool, Math.max(newest.get(pool) ?? 0, s.generation));
  }
  const perNode = new Map<string, Map<string, number>>(); // driver → node → devices
  const shared = new Set<string>();
  for (const s of slices) {
    if (!s.driver || s.generation < (newest.get(`${s.driver}\u0000${s.pool}`) ?? 0)) continue;
    if (!s.node) {
      if (s.devices > 0) shared.add(s.driver);
      continue;
    }
    let nodes = perNode.get(s.driver);
    if (!nodes) perNode.set(s.driver, (nodes = new Map()));
    nodes.set(s.node, (nodes.get(s.node) ?? 0) + s.devices);
  }
  const out: DeviceCapacity = new Map();
  for (const driver of new Set([...perNode.keys(), ...shared])) {
    let most = 0;
    let node: string | undefined;
    const nodes = perNode.get(driver) ?? new Map<string, number>();
    for (const [name, devices] of [...nodes].sort(([a], [b]) => a.localeCompare(b)))
      if (devices > most) [most, node] = [devices, name];
    out.set(driver, {
      most,
      node,
      nodes: [...nodes.values()].filter(d => d > 0).length,
      shared: shared.has(driver),
    });
  }
  return out;
}

// The slice list is replaced, never changed in place (a watch event, a new snapshot): its capacity
// is computed once per list.
const capacities = new WeakMap<readonly SliceAsRead[], DeviceCapacity>();
export function capacityOf(slices: readonly SliceAsRead[]): DeviceCapacity {
  let c = capacities.get(slices);
  if (!c) capacities.set(slices, (c = deviceCapacity(slices)));
  return c;
}
