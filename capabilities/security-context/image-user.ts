// Who a container's image runs as, and so who the fix makes it run as (pure: the image configs come
// in as data, looked up by the cluster view — the webhook's registry reads, or `check`'s).
//
//   image user                     runs as                                    and
//   numeric non-root (1001, 1001:1001)  its own UID (and GID when it names one)  keeps its files
//   root, 0 or unset                runAsUser/runAsGroup of the settings       a writable HOME
//   a name (app, ml, app:app,       the UID (and GID) its /etc/passwd and      its HOME from
//   1001:app) the image lists       /etc/group give it                         /etc/passwd
//   a name it does not list (or     runAsUser/runAsGroup of the settings       a writable HOME,
//   files not read)                 (the kubelet cannot check runAsNonRoot      a warning naming
//                                   against a name)                            it
//   unknown (not inspected)         runAsUser/runAsGroup of the settings       a warning
import type { V1Node } from "@kubernetes/client-node";
import { parseImage, type ImageRef } from "../../lib/objects/image-reference";
import { unknownImages, type ImageLookup, type Platform } from "../../lib/cluster/view";
import { containersOf, type ContainerRef, type PodTemplateRef } from "../../lib/objects/pod";
import type { RuleContext } from "../../lib/engine/policy";
import type { ImageFiles } from "../../lib/images/image-files";
import type { ImageShapes } from "../../lib/images/config-shapes";
import { bounded } from "../../lib/images/limits";
import { mirrorImage, mirrorsOf, registryAllowed } from "../image-registry/rules";

export type ImageUser =
  | {
      kind: "root";
      image: string;
      workingDir: string;
      home?: string;
      /** What its layers said of WORKDIR and a copier, when they were read (workdir-copy.ts). */
      files?: ImageFiles;
      shapes?: ImageShapes;
    }
  | {
      kind: "numeric";
      image: string;
      uid: number;
      gid?: number;
      workingDir: string;
      home?: string;
      /** The name the image's User gave, when its files put it in numbers. */
      named?: string;
      shapes?: ImageShapes;
    }
  | {
      kind: "named";
      image: string;
      name: string;
      workingDir: string;
      home?: string;
      /** Why its files did not put the name in numbers (not listed, not read). */
      note?: string;
      shapes?: ImageShapes;
    }
  | { kind: "unknown"; image: string; reason: string };

const NUMBER = /^\d{1,10}$/;
/** A node architecture as a label value writes it (anything else: not the pod's to choose). */
const ARCHITECTURE = /^[a-z0-9]([-a-z0-9_.]{0,30}[a-z0-9])?$/;
/** A Secret's name as the API accepts it. */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** Why an image is not read at all: the registry rules refuse it (image-registry denies it). */
export const NOT_ALLOWED = "not read, its registry is not allowed";

/** The image config's `User` ("", "root", "0", "1001", "1001:1001", "app", "app:app") read. */
export function imageUserOf(image: string, lookup: ImageLookup | undefined): ImageUser {
  if (!lookup) return { kind: "unknown", image, reason: "not looked up" };
  if (lookup.state === "unknown") return { kind: "unknown", image, reason: lookup.reason };
  const { user, workingDir, home, files, shapes } = lookup.config;
  const [name, group] = user.split(":", 2);
  // What the config says of ports, PATH and cache dirs (config-shapes.ts) goes with every kind.
  const base = { image, workingDir, home, ...(shapes ? { shapes } : {}) };
  if (name === "" || name === "root" || (NUMBER.test(name) && Number(name) === 0))
    return { kind: "root", ...base, ...(files ? { files } : {}) };
  // A name (or a named group) the image's own files list: its numbers, and its HOME unless the
  // config's Env sets one (as the runtime would: Env first, then /etc/passwd).
  if (files?.user) {
    const { uid, gid, home: passwdHome } = files.user;
    const withHome = { ...base, home: home ?? passwdHome };
    if (uid === 0) return { kind: "root", ...withHome, files };
    return { kind: "numeric", uid, gid, named: user, ...withHome };
  }
  if (!NUMBER.test(name))
    return { kind: "named", name, ...base, ...(files?.note ? { note: files.note } : {}) };
  const gid = group !== undefined && NUMBER.test(group) ? Number(group) : undefined;
  return { kind: "numeric", uid: Number(name), gid, ...base };
}

/** Who the fix makes a container run as, when nothing in the pod says. */
export interface Identity {
  uid: number;
  /** undefined: the runtime takes the primary group of the image's /etc/passwd. */
  gid?: number;
  /** The image's own user (numeric): its files stay its own. */
  fromImage: boolean;
  /** The UID has no HOME it can write in this image: mount one. */
  needsHome: boolean;
}

export function identityFor(
  user: ImageUser,
  defaults: { runAsUser: number; runAsGroup: number },
): Identity {
  switch (user.kind) {
    case "numeric":
      return { uid: user.uid, gid: user.gid, fromImage: true, needsHome: false };
    case "root":
    case "named":
      return {
        uid: defaults.runAsUser,
        gid: defaults.runAsGroup,
        fromImage: false,
        needsHome: true,
      };
    case "unknown":
      return {
        uid: defaults.runAsUser,
        gid: defaults.runAsGroup,
        fromImage: false,
        needsHome: false,
      };
  }
}

/** Containers whose images decide a user: init and app containers (ephemeral ones come later). */
export const imageContainers = (template: PodTemplateRef): ContainerRef[] =>
  containersOf(template).filter(c => c.kind !== "ephemeralContainers");

/**
 * The platform the kubelet pulls for: the pod's `kubernetes.io/arch` node selector, else the
 * architecture every known node shares, else amd64.
 */
export function platformOf(template: PodTemplateRef, ctx: RuleContext): Platform {
  const selector = (template.spec as { nodeSelector?: Record<string, unknown> } | undefined)
    ?.nodeSelector?.["kubernetes.io/arch"];
  if (typeof selector === "string" && ARCHITECTURE.test(selector))
    return { os: "linux", architecture: selector };
  return { os: "linux", architecture: clusterArchitecture(ctx.cluster.nodes()) };
}

// The live view hands out the same node list until a node changes: worked out once per list.
const architectureOfList = new WeakMap<readonly V1Node[], string>();
function clusterArchitecture(nodes: readonly V1Node[] | undefined): string {
  if (!nodes?.length) return "amd64";
  let arch = architectureOfList.get(nodes);
  if (arch === undefined) {
    const arches = new Set(nodes.map(n => n.status?.nodeInfo?.architecture).filter(Boolean));
    arch = arches.size === 1 ? [...arches][0]! : "amd64";
    architectureOfList.set(nodes, arch);
  }
  return arch;
}

/** The reference the kubelet will pull: the image after the mirror rewrite. */
function pulledRef(image: unknown, ctx: RuleContext): ImageRef | undefined {
  const parsed = parseImage(image);
  if (!parsed.ok) return undefined;
  if (!ctx.settings.registries.enabled || !Object.keys(ctx.settings.registries.mirrors).length)
    return parsed.ref;
  const mirrored = mirrorImage(parsed.ref, mirrorsOf(ctx.settings).mirrors);
  const again = mirrored ? parseImage(mirrored) : undefined;
  return again?.ok ? again.ref : parsed.ref;
}

/**
 * Each container's image user, keyed by the container (init and app containers), from one
 * bounded lookup of the pod's images through the cluster view.
 */
export async function imageUsersOf(
  template: PodTemplateRef,
  ctx: RuleContext,
): Promise<Map<ContainerRef["container"], ImageUser>> {
  const containers = imageContainers(template);
  const refs = containers.map(c => pulledRef(c.container.image, ctx));
  // Only images that pass the registry rules are read: a pod cannot make the module connect to a
  // registry that no admin allowed (the egress policy then decides where the connections go).
  const allowed = refs.map(r => r !== undefined && registryAllowed(r, ctx));
  const wanted = refs.filter((r, i): r is ImageRef => allowed[i]);
  // Off by setting: the same answer in the webhook and in `check`, without asking either.
  // A pod's own pull secrets only when the admin opted in (they need `get secrets` everywhere).
  const pullSecrets = ctx.settings.images.workloadPullSecrets
    ? {
        namespace: ctx.namespaceName,
        names: (template.spec?.imagePullSecrets ?? [])
          .map(s => s?.name)
          .filter((n): n is string => typeof n === "string" && SECRET_NAME.test(n)),
      }
    : undefined;
  const lookups = !wanted.length
    ? new Map<string, ImageLookup>()
    : ctx.settings.images.inspect
      ? await ctx.cluster.imageConfigs(wanted, platformOf(template, ctx), pullSecrets, ctx.deadline)
      : unknownImages(wanted, "images.inspect is off");
  const users = new Map<ContainerRef["container"], ImageUser>();
  containers.forEach((c, i) => {
    // What is said of it is bounded: the pod writes the image (up to 1 KiB before validation).
    const image = bounded(String(c.container.image ?? ""));
    const ref = refs[i];
    users.set(
      c.container,
      !ref
        ? { kind: "unknown", image, reason: "the image reference is not valid" }
        : !allowed[i]
          ? { kind: "unknown", image, reason: NOT_ALLOWED }
          : imageUserOf(image, lookups.get(ref.normalised)),
    );
  });
  return users;
}
