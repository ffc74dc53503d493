// The admission controller arming its own webhooks (see lib/webhooks/arming.ts for why): a round
// every few seconds reads the module's two webhook configurations and, once a replica is Ready
// behind their Service, sets their failure policy. Rounds go on after that: a re-deploy (`pepr
// deploy`, `kubectl apply`, `helm upgrade`) writes the configurations back as built (Ignore), and
// a running replica arms them again within one round. A configuration an admin annotated
// admission-guard.dev/disarm=true is set to Ignore and left so (lib/webhooks/arming.ts).
import { K8s, kind } from "kubernetes-fluent-client";
import { API_BUDGET_MS, describeError, withBudget } from "../cluster/api-calls";
import { webhookArming, webhookFailClosed } from "../metrics";
import type { Logger } from "../cluster/watched-store";
import {
  anyEndpointReady,
  armingPatch,
  failsClosed,
  isDisarmed,
  nextStep,
  servicesCalled,
  type EndpointSliceLike,
  type FailurePolicy,
  type Operation,
  type WebhookConfiguration,
} from "./arming";
import { DISARM_ANNOTATION } from "../objects/keys";

export const WEBHOOK_KINDS = [
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
] as const;
type WebhookKind = (typeof WEBHOOK_KINDS)[number];
/** Each kind's `webhook` label on /metrics. */
const WEBHOOK_LABEL = {
  MutatingWebhookConfiguration: { webhook: "mutating" },
  ValidatingWebhookConfiguration: { webhook: "validating" },
} as const;

/** What the arming asks of the API server (the live one below; tests give their own). */
export interface ArmingApi {
  /** The configuration, or undefined when there is none of that name. */
  get(kind: WebhookKind, name: string): Promise<WebhookConfiguration | undefined>;
  patch(kind: WebhookKind, name: string, ops: Operation[]): Promise<void>;
  endpointSlices(namespace: string, service: string): Promise<EndpointSliceLike[]>;
}

const isNotFound = (e: unknown) => (e as { status?: number } | undefined)?.status === 404;

export const liveArmingApi: ArmingApi = {
  async get(k, name) {
    try {
      return (await K8s(kind[k]).Get(name)) as WebhookConfiguration;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  },
  async patch(k, name, ops) {
    await K8s(kind[k], { name }).Patch(ops);
  },
  async endpointSlices(namespace, service) {
    const list = await K8s(kind.EndpointSlice)
      .InNamespace(namespace)
      .WithLabel("kubernetes.io/service-name", service)
      .Get();
    return list.items as EndpointSliceLike[];
  },
};

export interface ArmingOptions {
  /** The configurations' name: Pepr's `pepr-<uuid>`, the same for both kinds. */
  name: string;
  wanted: FailurePolicy;
  log: Logger;
  api?: ArmingApi;
  /** Between rounds while a configuration waits to be armed, and once all are. */
  intervalMs?: { waiting: number; armed: number };
}

export class WebhookArming {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** Services seen with a Ready endpoint in the last round: arming waits for a second sighting. */
  private seenReady = new Set<string>();
  /** What was last logged per configuration, so a state is said once, not every round. */
  private said = new Map<string, string>();
  private readonly api: ArmingApi;
  private readonly interval: { waiting: number; armed: number };

  constructor(private readonly options: ArmingOptions) {
    this.api = options.api ?? liveArmingApi;
    this.interval = options.intervalMs ?? { waiting: 2000, armed: 10_000 };
  }

  start(): void {
    const loop = async () => {
      let allArmed = false;
      try {
        allArmed = await this.round();
        this.said.delete("round");
      } catch (e) {
        this.say("round", "warn", `webhook arming: ${describeError(e)}`);
      }
      if (this.stopped) return;
      this.timer = setTimeout(loop, allArmed ? this.interval.armed : this.interval.waiting);
      this.timer.unref();
    };
    void loop();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One round over both configurations; true when every one present is armed. */
  async round(): Promise<boolean> {
    const { name, wanted } = this.options;
    const configs = await Promise.all(
      WEBHOOK_KINDS.map(k =>
        withBudget(this.api.get(k, name), API_BUDGET_MS, `reading ${k} ${name}`),
      ),
    );
    // What this replica reads is on /metrics (an absent configuration fails closed for nothing).
    for (const [i, k] of WEBHOOK_KINDS.entries())
      webhookFailClosed.set(WEBHOOK_LABEL[k], configs[i] && failsClosed(configs[i]) ? 1 : 0);
    // The Services' endpoints are read only while a configuration waits to be armed.
    const readyNow = new Set<string>();
    for (const config of configs) {
      if (!config || wanted !== "Fail" || isDisarmed(config) || !armingPatch(config, wanted))
        continue;
      for (const s of servicesCalled(config)) {
        const key = `${s.namespace}/${s.name}`;
        if (readyNow.has(key)) continue;
        const slices = await withBudget(
          this.api.endpointSlices(s.namespace, s.name),
          API_BUDGET_MS,
          `reading the EndpointSlices of Service ${key}`,
        );
        if (anyEndpointReady(slices)) readyNow.add(key);
      }
    }
    // Ready in this round and the one before: kube-proxy has had a round to route to it.
    const previously = this.seenReady;
    this.seenReady = readyNow;
    const served = (s: { namespace: string; name: string }) =>
      readyNow.has(`${s.namespace}/${s.name}`) && previously.has(`${s.namespace}/${s.name}`);

    let allArmed = true;
    for (const [i, k] of WEBHOOK_KINDS.entries()) {
      const step = nextStep(configs[i], wanted, served);
      if (step.state === "waiting") {
        allArmed = false;
        this.say(k, "info", `${k} ${name} not armed yet (failurePolicy ${wanted}): ${step.why}`);
      } else if (step.state === "arm") {
        await withBudget(
          this.api.patch(k, name, step.patch),
          API_BUDGET_MS,
          `patching ${k} ${name}`,
        );
        webhookFailClosed.set(WEBHOOK_LABEL[k], wanted === "Fail" ? 1 : 0);
        webhookArming.inc({ action: "arm" });
        // warn: the deployed controller logs at warn, and an operator needs to see this change.
        this.say(k, "warn", `${k} ${name} armed: failurePolicy ${wanted}`);
      } else if (step.state === "armed") {
        this.said.set(k, "armed");
      } else if (step.state === "disarmed") {
        if (step.patch) {
          await withBudget(
            this.api.patch(k, name, step.patch),
            API_BUDGET_MS,
            `patching ${k} ${name}`,
          );
          webhookFailClosed.set(WEBHOOK_LABEL[k], 0);
          webhookArming.inc({ action: "disarm" });
        }
        this.say(
          k,
          "warn",
          `${k} ${name} disarmed by its annotation ${DISARM_ANNOTATION}=true: failurePolicy Ignore, not armed while it is there`,
        );
      }
    }
    return allArmed;
  }

  /** Logs a message once per state change of `key`. */
  private say(key: string, level: "info" | "warn", message: string) {
    if (this.said.get(key) === message) return;
    this.said.set(key, message);
    this.options.log[level]({ webhooks: this.options.name }, message);
  }
}
