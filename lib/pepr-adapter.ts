// Turns the pure policies into a Pepr Capability: the webhook front door. Nothing here decides
// anything; it builds the rule context from the request and the live caches, calls the engine and
// translates its findings into Pepr's Mutate/Validate answers.
import { Capability, Log, a, type PeprMutateRequest, type PeprValidateRequest } from "pepr";
import type { KubernetesObject } from "kubernetes-fluent-client";
import type { ClusterView } from "./cluster";
import {
  contextFor,
  decide,
  fixPod,
  fixWorkload,
  modeOf,
  pendingWarnings,
  policyApplies,
  recordedFixes,
  templateIsFixed,
  validateAll,
} from "./engine";
import { isPod, podTemplateOf, WORKLOAD_KINDS, type KubeObject } from "./pod";
import type { Operation, Policy } from "./policy";
import type { Settings } from "./settings";
import { recordDecision } from "./metrics";
import { formatNote } from "./verdict";

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

/**
 * The webhook front door: ONE Pepr capability whose bindings run every policy through the engine.
 * (One Pepr capability per policy made Pepr evaluate 9 binding filters per policy on every request —
 * most of our overhead in the benchmark; the engine already loops over the policies.) Messages,
 * metrics and warnings still name each policy as `admission-guard/<capability>`.
 */
export function moduleCapability(
  deps: AdapterDeps,
  meta: { name: string; description: string } = {
    name: "admission-guard",
    description:
      "Fixes ML workloads to pass policy; denies early, with the fix, what it cannot fix",
  },
): Capability {
  const capability = new Capability({ ...meta, namespaces: [] });
  const { When } = capability;
  const { policies } = deps;

  async function mutatePod(req: PeprMutateRequest<KubernetesObject>): Promise<void> {
    const ctx = contextOf(req, deps);
    const { changes, errors } = await fixPod(policies, req.Raw as KubeObject, ctx);
    for (const e of errors) Log.error({ capability: e.capability, rule: e.rule }, e.message);
    for (const c of changes) recordDecision(c.capability, "fixed", 1, c.rule);
    Log.debug({ changes: changes.length, uid: req.Request.uid }, "mutated");
  }

  /** workloads.mutate: a workload's pod template fixed when it is applied. */
  async function mutateWorkload(req: PeprMutateRequest<KubernetesObject>): Promise<void> {
    const ctx = contextOf(req, deps);
    if (!policies.some(p => policyApplies(p, ctx))) return;
    const { changes, errors } = await fixWorkload(policies, req.Raw as KubeObject, ctx);
    for (const e of errors) Log.error({ capability: e.capability, rule: e.rule }, e.message);
    for (const c of changes) recordDecision(c.capability, "fixed", 1, c.rule);
  }

  async function validateObject(req: PeprValidateRequest<KubernetesObject>) {
    const raw = req.Raw as KubeObject;
    const ctx = contextOf(req, deps);
    const active = policies.filter(p => policyApplies(p, ctx));
    if (!active.length) return req.Approve();
    try {
      const { mode, warning } = modeOf(ctx);
      const findings = await validateAll(policies, raw, ctx);
      if (warning) findings.warnings.unshift(warning);
      const decision = decide(findings, mode);
      const warnings = [...decision.warnings];
      if (mode !== "audit") {
        if (isPod(raw)) {
          // What the mutating webhook fixed, from the trace annotation it left on the pod (on
          // CREATE: an update of the pod says nothing of fixes made when it was created).
          const fixed =
            ctx.operation === "CREATE" ? recordedFixes(raw) : new Map<string, string[]>();
          for (const p of active) {
            const rules = fixed.get(p.name);
            if (rules?.length) warnings.push(formatNote(p.name, `fixed ${rules.join(", ")}`));
          }
        } else {
          if (templateIsFixed(raw, deps.settings)) {
            // Fixed by the mutating webhook: said from the trace annotation of the template.
            const template = podTemplateOf(raw);
            const fixed = template ? recordedFixes({ metadata: template.metadata }) : new Map();
            for (const p of active) {
              const rules = fixed.get(p.name);
              if (rules?.length) warnings.push(formatNote(p.name, `fixed ${rules.join(", ")}`));
            }
          }
          // What its pods will still get when they are created.
          warnings.push(...pendingWarnings(findings.changes, String(raw.kind)));
        }
      }
      for (const v of findings.violations)
        recordDecision(v.capability, decision.allowed ? `allowed-${mode}` : "denied", 1, v.rule);
      if (!decision.allowed) {
        // warn, not info: the deployed module runs at LOG_LEVEL=warn (Pepr's per-request info lines
        // pile up in memory under load), and denials are what an operator looks for.
        Log.warn(
          {
            kind: raw.kind,
            namespace: ctx.namespaceName,
            name: raw.metadata?.name,
            uid: req.Request.uid,
          },
          `denied: ${decision.denials.join("; ")}`,
        );
        return req.Deny(decision.denials.join("; "), 403, warnings.length ? warnings : undefined);
      }
      if (findings.violations.length === 0)
        for (const p of active) recordDecision(p.name, "allowed", 1);
      return req.Approve(warnings.length ? warnings : undefined);
    } catch (e) {
      // Pepr would turn a thrown error into "Action failed with error: {}"; say what happened instead.
      const reason = e instanceof Error ? e.message : String(e);
      Log.error({ error: reason }, "validation failed");
      return req.Deny(
        `admission-guard: internal error (${reason}). Fix: report this bug; meanwhile label the namespace admission-guard.dev/mode=warn`,
        500,
      );
    }
  }

  if (policies.some(p => p.fix)) When(a.Pod).IsCreated().Mutate(mutatePod);
  // Pods are validated on UPDATE too: `kubectl set image` changes an image, `kubectl debug` adds an
  // ephemeral container (an UPDATE of pods/ephemeralcontainers, which this rule also covers).
  When(a.Pod).IsCreatedOrUpdated().Validate(validateObject);
  const extraKinds = policies.flatMap(p => p.extraKinds ?? []);
  for (const kindName of new Set([...WORKLOAD_KINDS, ...extraKinds])) {
    const model = (a as unknown as Record<string, typeof a.Pod>)[kindName];
    if (!model)
      throw new Error(`admission-guard: unknown kind ${kindName} in a policy's extraKinds`);
    // Only with workloads.mutate (read at build time too): the webhook then receives workloads to
    // mutate, and Pepr marks every object it mutates with an annotation of its own.
    if (deps.settings.workloads.mutate && (WORKLOAD_KINDS as readonly string[]).includes(kindName))
      When(model).IsCreatedOrUpdated().Mutate(mutateWorkload);
    When(model).IsCreatedOrUpdated().Validate(validateObject);
  }
  return capability;
}

/** One policy alone as a Pepr capability (the benchmark's Pepr floor, or a module of one policy). */
export function capabilityFor(policy: Policy, deps: AdapterDeps): Capability {
  return moduleCapability(
    { ...deps, policies: [policy] },
    { name: policy.name, description: policy.description },
  );
}
