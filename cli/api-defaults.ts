// The API server's defaulting that changes a verdict, done to a manifest before `check` judges it:
// the webhook sees objects after it, so `check` must too. Only what rules read is defaulted (a
// full defaulting pass is the API server's job):
//  - a volume with no source is an emptyDir (SetDefaults_Volume): Pod Security's restricted volume
//    check allows it, and would call it "unknown" before.
// (A request defaulting to its limit, and LimitRange defaults, are done by the quota rules, which
// need them for templates too: capabilities/resource-quota/resources.ts.)
import type { KubeObject } from "../lib/objects/pod";
import { podTemplateOf } from "../lib/workload-kinds/built-in";
import { isRecord } from "../lib/objects/record";

/** A copy of the object with the API server's defaults that matter to the rules. */
export function withApiDefaults(obj: KubeObject): KubeObject {
  const copy = structuredClone(obj);
  const template = podTemplateOf(copy);
  const volumes: unknown = template?.spec.volumes;
  if (Array.isArray(volumes))
    for (const volume of volumes)
      if (isRecord(volume) && Object.keys(volume).every(k => k === "name")) volume.emptyDir = {};
  return copy;
}
