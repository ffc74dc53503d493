// A small REST client for the real API server in the cluster suite: JSON in, JSON out, the HTTP
// status and the API server's warnings kept, errors not thrown (tests assert on them). Admin uses
// a client certificate; the module's controller a ServiceAccount token (see module.ts).
import { Agent } from "node:https";
import type { KubeObject } from "../../../lib/objects/pod";
import { sendHttps } from "../../support/https";
import type { Credentials } from "../../support/kubeconfig";

export interface KubeResponse<T = KubeObject> {
  status: number;
  body: T;
  /** The API server's `Warning:` headers (admission warnings among them), their text only. */
  warnings: string[];
  text: string;
}

/** The API server's Status message of a failed call, or "". */
export const statusMessage = (res: KubeResponse): string =>
  typeof (res.body as { message?: unknown })?.message === "string"
    ? (res.body as { message: string }).message
    : "";

// "299 - \"text\"": the text between the quotes, unescaped.
function warningTexts(header: string): string[] {
  // Node joins repeated Warning headers into one, ", "-separated: every `299 - "text"` in it.
  const texts = [...header.matchAll(/(?:^|,\s*)\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)].map(m =>
    m[1].replace(/\\(.)/g, "$1"),
  );
  return texts.length ? texts : [header];
}

export class KubeClient {
  private readonly agent: Agent;

  constructor(
    readonly server: string,
    caPem: string,
    private readonly credentials: Credentials,
  ) {
    this.agent = new Agent({
      keepAlive: true,
      ca: caPem,
      ...("token" in credentials ? {} : { cert: credentials.certPem, key: credentials.keyPem }),
    });
  }

  async raw(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<KubeResponse> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { Accept: "application/json" };
    if (payload !== undefined) headers["Content-Type"] = contentType;
    if ("token" in this.credentials) headers.Authorization = `Bearer ${this.credentials.token}`;
    const reply = await sendHttps(this.server + path, {
      method,
      agent: this.agent,
      headers,
      body: payload,
      timeoutMs: 30_000,
    });
    const header = reply.headers.warning;
    const warnings = (Array.isArray(header) ? header : header ? [header] : []).flatMap(
      warningTexts,
    );
    return { status: reply.status, body: reply.json as KubeObject, warnings, text: reply.text };
  }

  get(path: string) {
    return this.raw("GET", path);
  }

  create(path: string, body: unknown, query = "") {
    return this.raw("POST", path + query, body);
  }

  delete(path: string) {
    return this.raw("DELETE", path);
  }

  /** Server-side apply as `kubectl apply --server-side` does, with the field manager "cluster-test". */
  apply(path: string, body: unknown) {
    return this.raw(
      "PATCH",
      `${path}?fieldManager=cluster-test&force=true`,
      body,
      "application/apply-patch+yaml",
    );
  }

  mergePatch(path: string, body: unknown) {
    return this.raw("PATCH", path, body, "application/merge-patch+json");
  }

  close(): void {
    this.agent.destroy();
  }
}

/** The REST path of an object (or of its collection when it has no name), from its apiVersion and kind. */
export function pathOf(obj: KubeObject, plural?: string): string {
  const apiVersion = String(obj.apiVersion ?? "v1");
  const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const resource = plural ?? PLURALS[String(obj.kind)] ?? `${String(obj.kind).toLowerCase()}s`;
  const ns = obj.metadata?.namespace ? `/namespaces/${obj.metadata.namespace}` : "";
  const name = obj.metadata?.name ? `/${obj.metadata.name}` : "";
  return `${base}${ns}/${resource}${name}`;
}

const PLURALS: Record<string, string> = {
  NetworkPolicy: "networkpolicies",
  PodSecurityPolicy: "podsecuritypolicies",
  ResourceQuota: "resourcequotas",
  LimitRange: "limitranges",
  PriorityClass: "priorityclasses",
  Ingress: "ingresses",
  ValidatingAdmissionPolicy: "validatingadmissionpolicies",
};
