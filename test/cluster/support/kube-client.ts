// A small REST client for the real API server in the cluster suite: JSON in, JSON out, the HTTP
// status and the API server's warnings kept, errors not thrown (tests assert on them). Admin uses
// a client certificate; the module's controller a ServiceAccount token (see module.ts).
import { Agent, request } from "node:https";
import { stringify } from "yaml";
import type { KubeObject } from "../../../lib/pod";

export type Credentials = { certPem: string; keyPem: string } | { token: string };

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

/** A kubeconfig for one user of the cluster, as kubectl and kubernetes-fluent-client read it. */
export function kubeconfigYaml(server: string, caPem: string, credentials: Credentials): string {
  const user =
    "token" in credentials
      ? { token: credentials.token }
      : {
          "client-certificate-data": Buffer.from(credentials.certPem).toString("base64"),
          "client-key-data": Buffer.from(credentials.keyPem).toString("base64"),
        };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "loopback",
        cluster: { server, "certificate-authority-data": Buffer.from(caPem).toString("base64") },
      },
    ],
    users: [{ name: "user", user }],
    contexts: [{ name: "loopback", context: { cluster: "loopback", user: "user" } }],
    "current-context": "loopback",
  });
}

// "299 - \"text\"": the text between the quotes, unescaped.
function warningText(header: string): string {
  const match = /^\d{3} \S+ "((?:[^"\\]|\\.)*)"/.exec(header);
  return match ? match[1].replace(/\\(.)/g, "$1") : header;
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

  raw(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<KubeResponse> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { Accept: "application/json" };
    if (payload !== undefined) headers["Content-Type"] = contentType;
    if ("token" in this.credentials) headers.Authorization = `Bearer ${this.credentials.token}`;
    return new Promise((ok, fail) => {
      const req = request(this.server + path, { method, agent: this.agent, headers }, res => {
        const chunks: Buffer[] = [];
        res.on("data", c => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          const header = res.headers.warning;
          const warnings = (Array.isArray(header) ? header : header ? [header] : []).map(
            warningText,
          );
          ok({ status: res.statusCode ?? 0, body: parsed as KubeObject, warnings, text });
        });
        res.on("error", fail);
      });
      req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
      req.on("error", fail);
      req.end(payload);
    });
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
  Ingress: "ingresses",
};
