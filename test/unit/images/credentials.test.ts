// Registry credentials (lib/images/credentials.ts): docker config Secrets as kubectl create secret
// docker-registry writes them, the keys docker login writes, and what is wrong said per Secret.
import {
  credentialsOfSecrets,
  localDockerCredentials,
  parseDockerConfig,
  registryOfServer,
} from "../../../lib/images/credentials";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const secret = (name: string, config: unknown, key = ".dockerconfigjson") => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace: "pepr-system" },
  type: "kubernetes.io/dockerconfigjson",
  data: { [key]: b64(JSON.stringify(config)) },
});

describe("registryOfServer", () => {
  it.each([
    ["https://index.docker.io/v1/", "docker.io"],
    ["registry-1.docker.io", "docker.io"],
    ["ghcr.io", "ghcr.io"],
    ["https://Harbor.Internal:8443/v2/", "harbor.internal:8443"],
  ])("%s is %s", (server, registry) => expect(registryOfServer(server)).toBe(registry));
});

describe("parseDockerConfig", () => {
  it("reads auth (base64 user:password) and username/password, the first entry per registry winning", () => {
    const { table, problems } = parseDockerConfig(
      JSON.stringify({
        auths: {
          "https://index.docker.io/v1/": { auth: b64("robot:p:ss") },
          "ghcr.io": { username: "bot", password: "tok" },
          "registry-1.docker.io": { auth: b64("other:x") },
          "quay.io": { identitytoken: "opaque" },
        },
      }),
    );
    expect([...table]).toEqual([
      ["docker.io", { username: "robot", password: "p:ss" }],
      ["ghcr.io", { username: "bot", password: "tok" }],
    ]);
    expect(problems).toEqual(["quay.io: no username and password (or auth)"]);
  });

  it("reads the legacy .dockercfg map, and says when the text is not JSON", () => {
    expect([
      ...parseDockerConfig(JSON.stringify({ "ghcr.io": { auth: b64("a:b") } })).table,
    ]).toEqual([["ghcr.io", { username: "a", password: "b" }]]);
    expect(parseDockerConfig("{").problems).toEqual(["not JSON"]);
  });
});

describe("credentialsOfSecrets", () => {
  it("merges Secrets in order and names a Secret without a docker config", () => {
    const { table, problems } = credentialsOfSecrets([
      secret("regcred", { auths: { "ghcr.io": { auth: b64("first:1") } } }),
      secret(
        "legacy",
        { "ghcr.io": { auth: b64("second:2") }, "nvcr.io": { auth: b64("$oauthtoken:k") } },
        ".dockercfg",
      ),
      { apiVersion: "v1", kind: "Secret", metadata: { name: "opaque" }, data: { token: "eA==" } },
    ]);
    expect(table.get("ghcr.io")).toEqual({ username: "first", password: "1" });
    expect(table.get("nvcr.io")).toEqual({ username: "$oauthtoken", password: "k" });
    expect(problems).toEqual(["Secret opaque has no .dockerconfigjson"]);
  });
});

describe("localDockerCredentials (check --inspect-images)", () => {
  it("reads $DOCKER_CONFIG/config.json; without one, every registry is anonymous", () => {
    const dir = mkdtempSync(join(tmpdir(), "docker-config-"));
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ auths: { "ghcr.io": { auth: b64("me:pw") } } }),
    );
    expect(localDockerCredentials({ DOCKER_CONFIG: dir })("ghcr.io")).toEqual({
      username: "me",
      password: "pw",
    });
    expect(localDockerCredentials({ DOCKER_CONFIG: join(dir, "none") })("ghcr.io")).toBeUndefined();
  });
});
