// Turns a pure Policy into a Pepr Capability: the webhook front door. Nothing here decides
// anything; it builds the rule context from the request and the live caches, calls the engine and
// translates its findings into Pepr's Mutate/Validate answers.
import { Capability, Log, a, type PeprMutateRequest, type PeprValidateRequest } from "pepr";
import type { KubernetesObject } from "kubernetes-fluent-client";
import type { ClusterView } from "./cluster";
import {
  contextFor,
  decide,
  fixPod,
  modeOf,
  pendingWarnings,
  policyApplies,
  recordedFixes,
  validate,
} from "./engine";
import { isPod, WORKLOAD_KINDS, type KubeObject } from "./pod";
import type { Operation, Policy } from "./policy";
import type { Settings } from "./settings";
import { recordDecision } from "./metrics";

export interface AdapterDeps {
  settings: Settings;
  cluster: ClusterView;
  /** Every policy of the module, in order: workload validation simulates all their fixes. */
  policies: Policy[];
}

type Request = PeprMutateRequest<KubernetesObject> | PeprValidateRequest<KubernetesObject>;

function contextOf(req: Request, deps: AdapterDeps) {
  const r = req.Request;
  return contextFor(req.Raw as KubeObject, {
    settings: deps.settings,
    cluster: deps.cluster,
    operation: r.operation as Operation,
    namespace: r.namespace,
    oldObject: r.oldObject as KubeObject | undefined,
    dryRun: r.dryRun === true,
  });
}

export function capabilityFor(policy: Policy, deps: AdapterDeps): Capability {
  const capability = new Capability({
    name: policy.name,
    description: policy.description,
    namespaces: policy.namespaces ?? [],
  });
  const { When } = capability;

  async function mutatePod(req: PeprMutateRequest<KubernetesObject>): Promise<void> {
    const ctx = contextOf(req, deps);
    if (!policyApplies(policy, ctx)) return;
    const { changes, errors } = await fixPod([policy], req.Raw as KubeObject, ctx);
    for (const e of errors) Log.error({ capability: policy.name, rule: e.rule }, e.message);
    if (changes.length) recordDecision(policy.name, "fixed", changes.length);
    Log.debug(
      { capability: policy.name, changes: changes.length, uid: req.Request.uid },
      "mutated",
    );
  }

  async function validateObject(req: PeprValidateRequest<KubernetesObject>) {
    const raw = req.Raw as KubeObject;
    const ctx = contextOf(req, deps);
    if (!policyApplies(policy, ctx)) return req.Approve();
    try {
      const { mode, warning } = modeOf(ctx);
      const findings = await validate(policy, raw, ctx, deps.policies);
      // The mode warning concerns the namespace, not a capability: said once, by the first policy.
      if (warning && policy === deps.policies.find(p => policyApplies(p, ctx)))
        findings.warnings.unshift(warning);
      const decision = decide(findings, mode);
      const warnings = [...decision.warnings];
      if (mode !== "audit") {
        if (isPod(raw)) {
          const rules = recordedFixes(raw).get(policy.name);
          if (rules?.length)
            warnings.push(`admission-guard/${policy.name}: fixed ${rules.join(", ")}`);
        } else {
          warnings.push(...pendingWarnings(findings.changes, String(raw.kind)));
        }
      }
      for (const v of findings.violations)
        recordDecision(policy.name, decision.allowed ? `allowed-${mode}` : "denied", 1, v.rule);
      if (!decision.allowed) {
        Log.info(
          {
            capability: policy.name,
            kind: raw.kind,
            namespace: ctx.namespaceName,
            name: raw.metadata?.name,
            uid: req.Request.uid,
          },
          `denied: ${decision.denials.join("; ")}`,
        );
        return req.Deny(decision.denials.join("; "), 403, warnings.length ? warnings : undefined);
      }
      if (findings.violations.length === 0) recordDecision(policy.name, "allowed", 1);
      return req.Approve(warnings.length ? warnings : undefined);
    } catch (e) {
      // Pepr would turn a thrown error into "Action failed with error: {}"; say what happened instead.
      const reason = e instanceof Error ? e.message : String(e);
      Log.error({ capability: policy.name, error: reason }, "validation failed");
      return req.Deny(
        `admission-guard/${policy.name}: internal error (${reason}). Fix: report this bug; meanwhile label the namespace admission-guard.dev/mode=warn`,
        500,
      );
    }
  }

  if (policy.fix) When(a.Pod).IsCreated().Mutate(mutatePod);
  When(a.Pod).IsCreated().Validate(validateObject);
  for (const kindName of [...WORKLOAD_KINDS, ...(policy.extraKinds ?? [])]) {
    const model = (a as unknown as Record<string, typeof a.Pod>)[kindName];
    if (!model) throw new Error(`capability ${policy.name}: unknown kind ${kindName}`);
    When(model).IsCreatedOrUpdated().Validate(validateObject);
  }
  return capability;
}
