// Seccomp (PSA seccompProfile_baseline and seccompProfile_restricted). Baseline: a profile, where
// set, is RuntimeDefault or Localhost (policies 1.0-1.18 read the alpha annotations instead, and
// only them). Restricted, from 1.19: the pod or every container must set one (a container may rely
// on the pod's); from 1.25 pods declaring spec.os.name=windows are exempt.
import {
  ALLOWED,
  asObject,
  asString,
  fieldsOf,
  forbidden,
  versionsExemptingWindowsPods,
  joinQuote,
  namesOf,
  podField,
  podSecurityContext,
  securityContextOf,
  sortedUnique,
  visitContainers,
  type CheckResult,
  podSecurityCheck,
  annotationsOf,
  containerName,
  pluralize,
} from "./helpers";
import type { ContainerRef, PodTemplateRef } from "../../../lib/objects/pod";

export const validSeccomp = (t: string) => t === "RuntimeDefault" || t === "Localhost";

interface SeccompView {
  podSet: boolean;
  setters: string[];
  values: string[];
  fields: string[];
  unset: ContainerRef[];
}

function inspect(pod: PodTemplateRef): SeccompView {
  const view: SeccompView = { podSet: false, setters: [], values: [], fields: [], unset: [] };
  const podProfile = asObject(podSecurityContext(pod)?.seccompProfile);
  if (podProfile) {
    const type = asString(podProfile.type);
    if (validSeccomp(type)) view.podSet = true;
    else {
      view.setters.push("pod");
      view.values.push(type);
      view.fields.push(podField(pod, "securityContext.seccompProfile.type"));
    }
  }
  const bad = visitContainers(pod).filter(c => {
    const profile = asObject(securityContextOf(c)?.seccompProfile);
    if (!profile) {
      view.unset.push(c);
      return false;
    }
    const type = asString(profile.type);
    if (validSeccomp(type)) return false;
    view.values.push(type);
    return true;
  });
  if (bad.length) {
    view.setters.push(namesOf(bad));
    view.fields.push(fieldsOf(bad, "securityContext.seccompProfile.type"));
  }
  return view;
}

function badValues(view: SeccompView): CheckResult {
  return forbidden(
    "seccompProfile",
    `${view.setters.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedUnique(view.values))}`,
    `set ${view.fields.join(", ")} to RuntimeDefault (or Localhost with a localhostProfile)`,
  );
}

const POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod";
const CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/";
const validAnnotation = (v: string) =>
  v === "runtime/default" || v === "docker/default" || v.startsWith("localhost/");

/** Policies 1.0-1.18: the alpha seccomp annotations of the pod and of its containers. */
function annotationsOnly(pod: PodTemplateRef): CheckResult {
  const annotations = annotationsOf(pod);
  const keys = [
    POD_ANNOTATION,
    ...visitContainers(pod).map(c => CONTAINER_ANNOTATION_PREFIX + containerName(c)),
  ];
  const bad = sortedUnique(keys.filter(k => k in annotations && !validAnnotation(annotations[k])));
  if (!bad.length) return ALLOWED;
  const at = pod.path ? `${pod.path}.metadata.annotations` : "metadata.annotations";
  return forbidden(
    "seccompProfile",
    `forbidden ${pluralize("annotation", "annotations", bad.length)} ${bad.map(k => `${k}=${JSON.stringify(annotations[k])}`).join(", ")}`,
    `set ${bad.map(k => `${at}["${k}"]`).join(", ")} to runtime/default (or remove it)`,
  );
}

export const seccompProfileBaseline = podSecurityCheck({
  id: "seccompProfile_baseline",
  level: "baseline",
  versions: [
    { since: 0, check: annotationsOnly },
    {
      since: 19,
      check(pod) {
        const view = inspect(pod);
        return view.setters.length ? badValues(view) : ALLOWED;
      },
    },
  ],
});

function profileRequired(pod: PodTemplateRef): CheckResult {
  const view = inspect(pod);
  if (view.setters.length) return badValues(view);
  if (!view.podSet && view.unset.length) {
    return forbidden(
      "seccompProfile",
      `pod or ${namesOf(view.unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
      `set ${podField(pod, "securityContext.seccompProfile.type")} to RuntimeDefault`,
    );
  }
  return ALLOWED;
}

export const seccompProfileRestricted = podSecurityCheck({
  id: "seccompProfile_restricted",
  level: "restricted",
  overrides: ["seccompProfile_baseline"],
  // The API forbids seccompProfile on Windows pods, so PSA admits them without it.
  versions: versionsExemptingWindowsPods(19, profileRequired),
});
