// Registry credentials for reading image configs: the docker config Secrets an admin names in
// images.credentialsSecrets, in the module's own namespace (as Kyverno's imageRegistryCredentials).
// A workload's own imagePullSecrets are not read: that would need `get secrets` in every
// namespace. The build grants `get` on exactly those Secrets (the build overlay, scripts/overlay/entries.ts).
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import type { KubeObject } from "../objects/pod";
import type { RegistryCredentials } from "./registry-client";

/** Where Pepr runs the module (its Deployment, Service and Secrets). */
export const MODULE_NAMESPACE = "pepr-system";
/** How often the Secrets are read again (a rotated password is used within this). */
export const CREDENTIALS_REFRESH_MS = 5 * 60_000;

/** The registry host a docker config key names: "https://index.docker.io/v1/" → "docker.io". */
export function registryOfServer(server: string): string {
  const host = server
    .trim()
    .replace(/^[a-z]+:\/\//i, "")
    .replace(/\/.*$/, "")
    .toLowerCase();
  return ["index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"].includes(host)
    ? "docker.io"
    : host;
}

/** The `auths` of a docker config (`.dockerconfigjson`, or the legacy `.dockercfg` map itself). */
export function parseDockerConfig(text: string): {
  table: Map<string, RegistryCredentials>;
  problems: string[];
} {
  const table = new Map<string, RegistryCredentials>();
  const problems: string[] = [];
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { table, problems: ["not JSON"] };
  }
  const root = doc && typeof doc === "object" ? (doc as Record<string, unknown>) : {};
  const auths = (root.auths && typeof root.auths === "object" ? root.auths : root) as Record<
    string,
    unknown
  >;
  for (const [server, entry] of Object.entries(auths)) {
    const e = (entry && typeof entry === "object" ? entry : {}) as Record<string, unknown>;
    let username = typeof e.username === "string" ? e.username : undefined;
    let password = typeof e.password === "string" ? e.password : undefined;
    if ((!username || !password) && typeof e.auth === "string") {
      const decoded = Buffer.from(e.auth, "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      if (colon > 0) {
        username = decoded.slice(0, colon);
        password = decoded.slice(colon + 1);
      }
    }
    if (!username || !password) {
      problems.push(`${server}: no username and password (or auth)`);
      continue;
    }
    const registry = registryOfServer(server);
    if (!table.has(registry)) table.set(registry, { username, password });
  }
  return { table, problems };
}

/** The credentials of several Secrets, the first Secret naming a registry winning. */
export function credentialsOfSecrets(secrets: KubeObject[]): {
  table: Map<string, RegistryCredentials>;
  problems: string[];
} {
  const table = new Map<string, RegistryCredentials>();
  const problems: string[] = [];
  for (const secret of secrets) {
    const name = secret.metadata?.name ?? "?";
    const data = (secret.data ?? {}) as Record<string, string>;
    const encoded = data[".dockerconfigjson"] ?? data[".dockercfg"];
    if (!encoded) {
      problems.push(`Secret ${name} has no .dockerconfigjson`);
      continue;
    }
    const parsed = parseDockerConfig(Buffer.from(encoded, "base64").toString("utf8"));
    problems.push(...parsed.problems.map(p => `Secret ${name}: ${p}`));
    for (const [registry, creds] of parsed.table)
      if (!table.has(registry)) table.set(registry, creds);
  }
  return { table, problems };
}

/**
 * The named Secrets, read at start and every few minutes from the module's namespace. Reading
 * never blocks a request: until the first read, no credentials (anonymous lookups).
 */
export class CredentialsStore {
  private table = new Map<string, RegistryCredentials>();
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly names: readonly string[],
    private readonly log?: { warn: (fields: object, message: string) => void },
  ) {}

  get(registry: string): RegistryCredentials | undefined {
    return this.table.get(registry);
  }

  start(): void {
    if (!this.names.length) return;
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), CREDENTIALS_REFRESH_MS);
    this.timer.unref();
  }

  private async refresh(): Promise<void> {
    const secrets: KubeObject[] = [];
    for (const name of this.names) {
      try {
        secrets.push(
          (await K8s(kind.Secret).InNamespace(MODULE_NAMESPACE).Get(name)) as KubeObject,
        );
      } catch (e) {
        this.log?.warn(
          { secret: name, error: (e as Error)?.message ?? String(e) },
          `images.credentialsSecrets: Secret ${MODULE_NAMESPACE}/${name} could not be read; its registries are read anonymously`,
        );
      }
    }
    const { table, problems } = credentialsOfSecrets(secrets);
    for (const problem of problems) this.log?.warn({}, `images.credentialsSecrets: ${problem}`);
    this.table = table;
  }
}

/**
 * `check --inspect-images` on a developer's machine or in CI: the credentials `docker login` left
 * in $DOCKER_CONFIG/config.json (default ~/.docker/config.json). Credential helpers are not run.
 */
export function localDockerCredentials(
  env: NodeJS.ProcessEnv = process.env,
): (registry: string) => RegistryCredentials | undefined {
  const dir = env.DOCKER_CONFIG || join(env.HOME || homedir(), ".docker");
  let table = new Map<string, RegistryCredentials>();
  try {
    table = parseDockerConfig(readFileSync(join(dir, "config.json"), "utf8")).table;
  } catch {
    // no docker config: anonymous
  }
  return registry => table.get(registry);
}
