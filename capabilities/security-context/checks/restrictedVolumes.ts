// Restricted: only these volume types (PSA restrictedVolumes, 1.0; image volumes allowed since
// Kubernetes 1.33). Replaces the baseline hostPathVolumes check.
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
  type PodSecurityCheck,
} from "./helpers";

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

export const restrictedVolumes: PodSecurityCheck = {
  id: "restrictedVolumes",
  level: "restricted",
  overrides: ["hostPathVolumes"],
  check(pod) {
    const names: string[] = [];
    const types: string[] = [];
    for (const raw of asArray(specOf(pod).volumes)) {
      const volume = asObject(raw) ?? {};
      if (ALLOWED_VOLUME_TYPES.some(t => asObject(volume[t]))) continue;
      names.push(asString(volume.name));
      types.push(KNOWN_VOLUME_TYPES.find(t => asObject(volume[t])) ?? "unknown");
    }
    if (!names.length) return ALLOWED;
    const typeList = sortedUnique(types);
    return forbidden(
      "restricted volume types",
      `${pluralize("volume", "volumes", names.length)} ${joinQuote(names)} ${pluralize("uses", "use", names.length)} ${pluralize("restricted volume type", "restricted volume types", typeList.length)} ${joinQuote(typeList)}`,
      `replace ${joinQuote(names)} in ${podField(pod, "volumes")} with one of ${ALLOWED_VOLUME_TYPES.join(", ")} (e.g. a persistentVolumeClaim)`,
    );
  },
};
