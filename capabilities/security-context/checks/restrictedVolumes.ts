// Restricted: only these volume types (PSA restrictedVolumes, 1.0). Replaces the baseline
// hostPathVolumes check. Image volumes are allowed by PSA from Kubernetes 1.33 on, at every policy
// version; a v1.32 API server's PSA calls them "unknown" and denies them (the real-PSA parity table,
// test/cluster). Here they are allowed from policy 1.33, which the level code caps at the API
// server's version: exact on any cluster for "latest", stricter than PSA only for a namespace
// pinned below v1.33 on a newer cluster.
import {
  ALLOWED,
  asArray,
  asObject,
  asString,
  forbidden,
  joinQuote,
  pluralize,
  podField,
  sortedUnique,
  specOf,
  podSecurityCheck,
  type PodSecurityCheck,
} from "./helpers";

/** The volume types restricted allows (at its newest version). */
export const ALLOWED_VOLUME_TYPES = [
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "image",
  "persistentVolumeClaim",
  "projected",
  "secret",
];

/** Volume source fields the API knows (the rest count as "unknown", as in PSA). */
const KNOWN_VOLUME_TYPES = [
  "image",
  "hostPath",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "nfs",
  "iscsi",
  "glusterfs",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "fc",
  "azureFile",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "portworxVolume",
  "scaleIO",
  "storageos",
];

/** The check allowing only `allowed` volume types. */
function onlyVolumeTypes(allowed: readonly string[]): PodSecurityCheck["check"] {
  return pod => {
    const names: string[] = [];
    const types: string[] = [];
    for (const raw of asArray(specOf(pod).volumes)) {
      const volume = asObject(raw) ?? {};
      if (allowed.some(t => asObject(volume[t]))) continue;
      names.push(asString(volume.name));
      types.push(KNOWN_VOLUME_TYPES.find(t => asObject(volume[t])) ?? "unknown");
    }
    if (!names.length) return ALLOWED;
    const typeList = sortedUnique(types);
    return forbidden(
      "restricted volume types",
      `${pluralize("volume", "volumes", names.length)} ${joinQuote(names)} ${pluralize("uses", "use", names.length)} ${pluralize("restricted volume type", "restricted volume types", typeList.length)} ${joinQuote(typeList)}`,
      `replace ${joinQuote(names)} in ${podField(pod, "volumes")} with one of ${allowed.join(", ")} (e.g. a persistentVolumeClaim)`,
    );
  };
}

export const restrictedVolumes = podSecurityCheck({
  id: "restrictedVolumes",
  level: "restricted",
  overrides: ["hostPathVolumes"],
  versions: [
    { since: 0, check: onlyVolumeTypes(ALLOWED_VOLUME_TYPES.filter(t => t !== "image")) },
    { since: 33, check: onlyVolumeTypes(ALLOWED_VOLUME_TYPES) },
  ],
});
