// `npx pepr dev` never applies the build overlay's objects, so nothing would create the Exemptions
// namespace labelled as the install's own. In dev the controller creates it, and only creates it:
// one that exists (a tenant may have created it first) is never labelled, and the log says what an
// admin runs instead. Deployed, the overlay creates it and the module's RBAC has no namespace create.
// Why: docs/adr/0028-exemptions-refused-where-they-do-not-count.md
import { K8s, kind } from "kubernetes-fluent-client";
import { describeError } from "./api-calls";
import type { Logger } from "./watched-store";
import { namespaceInfoOf } from "./view";
import type { KubeObject } from "../objects/pod";
import {
  exemptionsNamespaceOwned,
  notOwnedFix,
  notOwnedReason,
  ownedExemptionsNamespace,
} from "../exemptions";

/** The two API calls it makes (tests inject a fake). */
export interface NamespaceClient {
  /** POST: fails with HTTP 409 AlreadyExists when the namespace exists, changing nothing. */
  create(namespace: KubeObject): Promise<unknown>;
  get(name: string): Promise<KubeObject>;
}

const fluentClient: NamespaceClient = {
  create: ns => K8s(kind.Namespace).Create(ns),
  get: name => K8s(kind.Namespace).Get(name) as Promise<KubeObject>,
};

export type DevNamespaceOutcome = "created" | "exists-owned" | "exists-not-owned" | "failed";

const isAlreadyExists = (e: unknown) =>
  typeof e === "object" && e !== null && (e as { status?: unknown }).status === 409;

/** Creates the Exemptions namespace labelled as the install's own, unless it exists. */
export async function createExemptionsNamespace(
  name: string,
  moduleUuid: string,
  log: Logger,
  client: NamespaceClient = fluentClient,
): Promise<DevNamespaceOutcome> {
  try {
    await client.create(ownedExemptionsNamespace(name, moduleUuid));
    log.info({ namespace: name }, `exemptions: created namespace ${name}, the install's own`);
    return "created";
  } catch (e) {
    if (!isAlreadyExists(e)) {
      log.warn(
        { namespace: name, error: describeError(e) },
        `exemptions: could not create namespace ${name}, so no Exemption counts. Fix: create it as docs/exemptions.md says`,
      );
      return "failed";
    }
  }
  let existing: KubeObject;
  try {
    existing = await client.get(name);
  } catch (e) {
    log.warn(
      { namespace: name, error: describeError(e) },
      `exemptions: namespace ${name} exists and could not be read; it was left as it is`,
    );
    return "failed";
  }
  const info = namespaceInfoOf(existing);
  if (exemptionsNamespaceOwned(info, moduleUuid)) return "exists-owned";
  log.warn(
    { namespace: name },
    `exemptions: ${notOwnedReason(info, moduleUuid)}. The module never labels a namespace it did not create. Fix: ${notOwnedFix(name, moduleUuid)}`,
  );
  return "exists-not-owned";
}
