// Baseline: hostPath volumes are forbidden (PSA hostPathVolumes, 1.0). Replaced by
// restrictedVolumes at the restricted level.
import {
  ALLOWED,
  asArray,
  asObject,
  asString,
  forbidden,
  joinQuote,
  pluralize,
  podField,
  specOf,
  podSecurityCheck,
} from "./helpers";

export const hostPathVolumes = podSecurityCheck({
  id: "hostPathVolumes",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const names = asArray(specOf(pod).volumes)
          .map(asObject)
          .filter(v => v && asObject(v.hostPath))
          .map(v => asString(v!.name));
        if (!names.length) return ALLOWED;
        return forbidden(
          "hostPath volumes",
          `${pluralize("volume", "volumes", names.length)} ${joinQuote(names)}`,
          `replace the hostPath of ${joinQuote(names)} in ${podField(pod, "volumes")} with a persistentVolumeClaim, configMap, secret or emptyDir`,
        );
      },
    },
  ],
});
