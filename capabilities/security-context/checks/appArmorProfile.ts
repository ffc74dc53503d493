// Baseline: AppArmor may not be turned off (PSA appArmorProfile, 1.0, which reads both the
// appArmorProfile fields and the deprecated per-container annotations).
import {
  ALLOWED,
  annotationsOf,
  asObject,
  asString,
  fieldsOf,
  forbidden,
  joinQuote,
  namesOf,
  pluralize,
  podField,
  podSecurityContext,
  securityContextOf,
  sortedUnique,
  visitContainers,
  podSecurityCheck,
} from "./helpers";

export const APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/";

const allowedType = (t: string) => t === "RuntimeDefault" || t === "Localhost";
const allowedAnnotation = (v: string) =>
  v === "" || v === "runtime/default" || v.startsWith("localhost/");

export const appArmorProfile = podSecurityCheck({
  id: "appArmorProfile",
  level: "baseline",
  versions: [
    {
      since: 0,
      check(pod) {
        const setters: string[] = [];
        const values: string[] = [];
        const fields: string[] = [];
        const podProfile = asObject(podSecurityContext(pod)?.appArmorProfile);
        if (podProfile && !allowedType(asString(podProfile.type))) {
          setters.push("pod");
          values.push(asString(podProfile.type));
          fields.push(podField(pod, "securityContext.appArmorProfile.type"));
        }
        const bad = visitContainers(pod).filter(c => {
          const profile = asObject(securityContextOf(c)?.appArmorProfile);
          if (!profile || allowedType(asString(profile.type))) return false;
          values.push(asString(profile.type));
          return true;
        });
        if (bad.length) {
          setters.push(namesOf(bad));
          fields.push(fieldsOf(bad, "securityContext.appArmorProfile.type"));
        }
        const valueList = sortedUnique(values);
        const annotations = Object.entries(annotationsOf(pod))
          .filter(([k, v]) => k.startsWith(APPARMOR_ANNOTATION_PREFIX) && !allowedAnnotation(v))
          .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
          .sort();
        const fixes: string[] = [];
        if (fields.length) {
          fixes.push(`set ${fields.join(", ")} to RuntimeDefault or Localhost (or remove it)`);
        }
        if (annotations.length) {
          valueList.push(...annotations);
          setters.push(pluralize("annotation", "annotations", annotations.length));
          const keys = annotations.map(a => a.slice(0, a.indexOf("=")));
          const at = pod.path ? `${pod.path}.metadata.annotations` : "metadata.annotations";
          fixes.push(
            `set ${keys.map(k => `${at}["${k}"]`).join(", ")} to runtime/default or localhost/<profile> (or remove it)`,
          );
        }
        if (!setters.length) return ALLOWED;
        return forbidden(
          pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", valueList.length),
          `${setters.join(" and ")} must not set AppArmor profile type to ${joinQuote(valueList)}`,
          fixes.join("; "),
        );
      },
    },
  ],
});
