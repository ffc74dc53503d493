// Seccomp (PSA seccompProfile_baseline 1.19 and seccompProfile_restricted 1.25). Baseline: a profile,
// where set, is RuntimeDefault or Localhost. Restricted: the pod or every container must set one
// (a container may rely on the pod's); pods declaring spec.os.name=windows are exempt.
import {
  ALLOWED,
  asObject,
  asString,
  fieldsOf,
  forbidden,
  isWindowsPod,
  joinQuote,
  namesOf,
  podField,
  podSecurityContext,
  securityContextOf,
  sortedUnique,
  visitContainers,
  type CheckResult,
  type PodSecurityCheck,
} from "./helpers";
import type { ContainerRef, PodTemplateRef } from "../../../lib/pod";

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

export const seccompProfileBaseline: PodSecurityCheck = {
  id: "seccompProfile_baseline",
  level: "baseline",
  check(pod) {
    const view = inspect(pod);
    return view.setters.length ? badValues(view) : ALLOWED;
  },
};

export const seccompProfileRestricted: PodSecurityCheck = {
  id: "seccompProfile_restricted",
  level: "restricted",
  overrides: ["seccompProfile_baseline"],
  check(pod) {
    // The API forbids seccompProfile on Windows pods, so PSA admits them without it.
    if (isWindowsPod(pod)) return ALLOWED;
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
  },
};
