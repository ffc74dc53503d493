// May the pod's ServiceAccount read the secrets the pod references? A warning by default, at most
// serviceAccount.maxSecretReviews per object.
// Why: docs/adr/0015-secret-access-warns-with-bounded-reviews.md
import { API_BUDGET_MS, CALL } from "../../lib/cluster/api-calls";
import { recordSkipped } from "../../lib/metrics";
import {
  containersOf,
  describeContainer,
  describeObject,
  type KubeObject,
} from "../../lib/objects/pod";
import type { PodTemplateRef } from "../../lib/objects/pod";
import { envName } from "../../lib/settings";
import { formatNote } from "../../lib/objects/verdict";
import { withThousands } from "../payload-size/measure";
import {
  noFindings,
  type PodTarget,
  type RuleContext,
  type RuleFindings,
} from "../../lib/engine/policy";
import { CAPABILITY, serviceAccountOf } from "./rules";
import { isRecord } from "../../lib/objects/record";

const nameIn = (x: unknown, field: string): string | undefined =>
  isRecord(x) && typeof x[field] === "string" && x[field] !== "" ? (x[field] as string) : undefined;

/** Places named per secret in a message; more are shown as MORE_PLACES. */
const MAX_PLACES = 3;
const MORE_PLACES = "…";

/**
 * The other volume sources of core/v1 that name a Secret of the pod's namespace, which the kubelet
 * reads for the pod: [source, reference field or none, name field]. PersistentVolumeClaims (and
 * `ephemeral` claim templates) name none: the secrets of a PersistentVolume are the admin's.
 */
const VOLUME_SECRET_REFS: readonly (readonly [string, string | undefined, string])[] = [
  ["azureFile", undefined, "secretName"],
  ["cephfs", "secretRef", "name"],
  ["cinder", "secretRef", "name"],
  ["csi", "nodePublishSecretRef", "name"],
  ["flexVolume", "secretRef", "name"],
  ["iscsi", "secretRef", "name"],
  ["rbd", "secretRef", "name"],
  ["scaleIO", "secretRef", "name"],
  ["storageos", "secretRef", "name"],
];

/**
 * Every secret a pod spec references → where (for messages, at most MAX_PLACES places, then
 * MORE_PLACES), in first-seen order.
 */
export function secretReferences(template: PodTemplateRef): Map<string, string[]> {
  const refs = new Map<string, string[]>();
  const add = (name: string | undefined, where: string) => {
    if (!name) return;
    const list = refs.get(name) ?? [];
    if (list.length < MAX_PLACES) {
      if (!list.includes(where)) list.push(where);
    } else if (list.length === MAX_PLACES && !list.includes(where)) list.push(MORE_PLACES);
    refs.set(name, list);
  };
  for (const ref of containersOf(template)) {
    const c = ref.container as unknown as Record<string, unknown>;
    const who = describeContainer(ref);
    if (Array.isArray(c.env))
      for (const e of c.env)
        add(
          nameIn(
            isRecord(e) && isRecord(e.valueFrom) ? e.valueFrom.secretKeyRef : undefined,
            "name",
          ),
          `env of ${who}`,
        );
    if (Array.isArray(c.envFrom))
      for (const e of c.envFrom)
        add(nameIn(isRecord(e) ? e.secretRef : undefined, "name"), `envFrom of ${who}`);
  }
  const volumes: unknown = (template.spec as unknown as Record<string, unknown>).volumes;
  if (Array.isArray(volumes)) {
    for (const v of volumes) {
      if (!isRecord(v)) continue;
      const volume = `volume "${typeof v.name === "string" ? v.name : "?"}"`;
      add(nameIn(v.secret, "secretName"), volume);
      for (const [source, ref, field] of VOLUME_SECRET_REFS) {
        const from = v[source];
        add(
          nameIn(ref ? (isRecord(from) ? from[ref] : undefined) : from, field),
          `${volume} (${source}.${ref ? `${ref}.` : ""}${field})`,
        );
      }
      const sources = isRecord(v.projected) ? v.projected.sources : undefined;
      if (Array.isArray(sources))
        for (const s of sources)
          add(nameIn(isRecord(s) ? s.secret : undefined, "name"), `projected ${volume}`);
    }
  }
  return refs;
}

/** A Role name derived from the ServiceAccount's, within the 253-character limit. */
const roleName = (serviceAccount: string) => `${serviceAccount.slice(0, 230)}-secret-reader`;

/** The two kubectl commands an admin runs to let the ServiceAccount get exactly these secrets. */
export function grantCommands(
  namespace: string,
  serviceAccount: string,
  secrets: string[],
): string {
  const role = roleName(serviceAccount);
  const names = secrets.map(s => `--resource-name=${s}`).join(" ");
  return (
    `kubectl create role ${role} --verb=get --resource=secrets ${names} -n ${namespace} && ` +
    `kubectl create rolebinding ${role} --role=${role} --serviceaccount=${namespace}:${serviceAccount} -n ${namespace}`
  );
}

/** Names quoted in a note; past the first few, how many more. */
const NAMED_IN_NOTE = 5;
const quoteList = (names: string[]) =>
  names
    .slice(0, NAMED_IN_NOTE)
    .map(n => `"${n}"`)
    .join(", ") +
  (names.length > NAMED_IN_NOTE ? ` and ${withThousands(names.length - NAMED_IN_NOTE)} more` : "");

/** What one judgement (one object, all its roles) has asked about so far. */
interface Asked {
  secrets: Set<string>;
  /** No review starts after it (epoch ms): the roles of a workload share it. */
  deadline: number;
  /** Secrets the cap left out, counted once each in the metrics (made when the cap is hit). */
  skipped?: Set<string>;
}
// Keyed by the judgement's context: one per object judged, shared by its roles.
const askedIn = new WeakMap<RuleContext, Asked>();

/**
 * The secrets of this pod spec that may still be asked about, within the object's cap
 * (serviceAccount.maxSecretReviews distinct secrets; those asked by an earlier role count once).
 */
function withinCap(
  secrets: string[],
  ctx: RuleContext,
): { asked: Asked; take: string[]; skipped: number } {
  let asked = askedIn.get(ctx);
  if (!asked)
    askedIn.set(ctx, (asked = { secrets: new Set(), deadline: Date.now() + API_BUDGET_MS }));
  const take: string[] = [];
  let skipped = 0;
  for (const secret of secrets) {
    if (!asked.secrets.has(secret)) {
      if (asked.secrets.size >= ctx.settings.serviceAccount.maxSecretReviews) {
        const left = (asked.skipped ??= new Set());
        if (!left.has(secret)) {
          left.add(secret);
          skipped++;
        }
        continue;
      }
      asked.secrets.add(secret);
    }
    take.push(secret);
  }
  return { asked, take, skipped };
}

/** One question per pod (ClusterView.secretAccess), one finding for all secrets it may not get. */
export async function checkSecretAccess(
  object: KubeObject,
  target: PodTarget,
  ctx: RuleContext,
): Promise<RuleFindings> {
  const findings = noFindings();
  const mode = ctx.settings.serviceAccount.secretAccess;
  if (mode === "off" || !ctx.namespaceName) return findings;
  const refs = secretReferences(target.template);
  if (!refs.size) return findings;
  const ns = ctx.namespaceName;
  const sa = serviceAccountOf(target.template.spec);
  const what = target.isTemplate ? `the pods of ${describeObject(object)}` : describeObject(object);
  const { asked, take: secrets, skipped } = withinCap([...refs.keys()], ctx);
  // Reviews the cap left out, on /metrics (a snapshot makes no API calls).
  if (ctx.cluster.source === "live") recordSkipped(CALL.accessReview, skipped);
  const beyondCap = refs.size - secrets.length;
  if (beyondCap) {
    const cap = ctx.settings.serviceAccount.maxSecretReviews;
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `not checked whether ServiceAccount ${ns}/${sa} may get ${withThousands(beyondCap)} of the ${withThousands(refs.size)} secrets named by ${what}: at most ${withThousands(cap)} are checked per object. Fix: keep the values in fewer Secrets (one Secret holds many keys, read with one envFrom secretRef or one secret volume); admins: serviceAccount.maxSecretReviews (env ${envName("serviceAccount.maxSecretReviews")})`,
      ),
    );
  }
  if (!secrets.length) return findings;
  const access = await ctx.cluster.secretAccess(ns, sa, secrets, asked.deadline);

  const unknown = secrets.filter(s => access?.allowed.get(s) === undefined);
  if (unknown.length) {
    const why =
      ctx.cluster.source === "snapshot"
        ? "the cluster snapshot holds no Roles or bindings"
        : "the API server gave no answer in time";
    findings.warnings.push(
      formatNote(
        CAPABILITY,
        `not checked whether ServiceAccount ${ns}/${sa} may get secret(s) ${quoteList(unknown)} (${why})`,
      ),
    );
  }
  const denied = secrets.filter(s => access?.allowed.get(s) === false);
  if (!denied.length) return findings;
  const detail = denied.map(s => `"${s}" (${refs.get(s)!.join("; ")})`).join(", ");
  findings.violations.push({
    rule: "secret-access",
    message: `ServiceAccount ${ns}/${sa} of ${what} may not get secret${denied.length > 1 ? "s" : ""} ${detail}`,
    fix: grantCommands(ns, sa, denied),
    severity: mode === "enforce" ? "deny" : "warn",
  });
  return findings;
}
