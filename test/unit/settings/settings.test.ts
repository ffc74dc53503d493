// Settings are validated once, at start-up (and by `check --settings`): a value that cannot work
// stops the start with a message naming the key, where it was set and the value.
import {
  backgroundBindingsWanted,
  defaultSettings,
  parseSettings,
  parseSettingsYaml,
  SettingsError,
  settingsFromEnv,
} from "../../../lib/settings";

function problems(run: () => unknown): string[] {
  try {
    run();
  } catch (e) {
    if (e instanceof SettingsError) return e.problems;
    throw e;
  }
  throw new Error("the settings were accepted");
}

describe("settings from the environment", () => {
  it("reads one variable per key, lists comma-separated, values as YAML", () => {
    const s = settingsFromEnv({
      ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io, docker.io/myorg",
      ADMISSION_GUARD_REGISTRIES_MIRRORS: '{"docker.io": "harbor.internal/dockerhub"}',
      ADMISSION_GUARD_SECURITY_CONTEXT_RUN_AS_USER: "2000",
      ADMISSION_GUARD_MODE: "warn",
    });
    expect(s.registries.allowed).toEqual(["ghcr.io", "docker.io/myorg"]);
    expect(s.registries.mirrors).toEqual({ "docker.io": "harbor.internal/dockerhub" });
    expect(s.securityContext.runAsUser).toBe(2000);
    expect(s.mode).toBe("warn");
  });

  it("refuses a registry entry with a tag, naming key, variable and value", () => {
    expect(
      problems(() => settingsFromEnv({ ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io/org:v1" })),
    ).toEqual([
      'registries.allowed[0] (ADMISSION_GUARD_REGISTRIES_ALLOWED): "ghcr.io/org:v1" is not a registry or repository prefix (a prefix cannot carry a tag); write a host such as ghcr.io, or a host and path such as docker.io/myorg',
    ]);
  });

  it("refuses an allow-list whose every entry is invalid (it would deny every pod), one problem per entry", () => {
    const said = problems(() =>
      settingsFromEnv({ ADMISSION_GUARD_REGISTRIES_ALLOWED: "ghcr.io@sha256:abc,Not A Host/x" }),
    );
    expect(said).toHaveLength(2);
    expect(said[0]).toMatch(/^registries\.allowed\[0\] .*"ghcr\.io@sha256:abc".*digest/);
    expect(said[1]).toMatch(/^registries\.allowed\[1\] .*"Not A Host\/x"/);
  });

  it("refuses a mirror whose source or target is not a prefix", () => {
    const said = problems(() =>
      settingsFromEnv({
        ADMISSION_GUARD_REGISTRIES_MIRRORS: '{"docker.io:latest": "harbor.internal"}',
      }),
    );
    expect(said[0]).toMatch(
      /^registries\.mirrors\["docker\.io:latest"\] \(ADMISSION_GUARD_REGISTRIES_MIRRORS\): "docker\.io:latest" is not a registry/,
    );
    const target = problems(() =>
      settingsFromEnv({ ADMISSION_GUARD_REGISTRIES_MIRRORS: '{"docker.io": "harbor@x"}' }),
    );
    expect(target[0]).toMatch(/"harbor@x" is not a registry or repository prefix/);
  });

  it("refuses names and paths the cluster could not have, with the value", () => {
    expect(
      problems(() => settingsFromEnv({ ADMISSION_GUARD_IGNORED_NAMESPACES: "ml,Team_B" })),
    ).toEqual([
      `ignoredNamespaces[1] (ADMISSION_GUARD_IGNORED_NAMESPACES): must be a namespace name (lower case, digits, '-') (got "Team_B")`,
    ]);
    expect(
      problems(() => settingsFromEnv({ ADMISSION_GUARD_SERVICE_ACCOUNT_NAME: "Workload" }))[0],
    ).toMatch(
      /^serviceAccount\.name \(ADMISSION_GUARD_SERVICE_ACCOUNT_NAME\): must be a DNS subdomain name \(got "Workload"\)/,
    );
    expect(
      problems(() =>
        settingsFromEnv({ ADMISSION_GUARD_SECURITY_CONTEXT_WRITABLE_PATHS: "tmp" }),
      )[0],
    ).toMatch(/^securityContext\.writablePaths\[0\].*absolute path \(got "tmp"\)/);
  });

  it("names the document variable when the value came from ADMISSION_GUARD_SETTINGS", () => {
    expect(
      problems(() =>
        settingsFromEnv({ ADMISSION_GUARD_SETTINGS: "registries: {allowed: ['quay.io:tag']}" }),
      )[0],
    ).toMatch(/^registries\.allowed\[0\] \(ADMISSION_GUARD_SETTINGS\): "quay\.io:tag"/);
  });

  it("refuses a variable that names no setting", () => {
    expect(problems(() => settingsFromEnv({ ADMISSION_GUARD_REGISTRY_ALLOWED: "x" }))[0]).toMatch(
      /^ADMISSION_GUARD_REGISTRY_ALLOWED: names no setting/,
    );
  });
});

describe("the settings' YAML reader (the controller's environment and check --settings)", () => {
  it("reads YAML 1.2's core schema: dates and yes/no stay strings, false and 0 are values", () => {
    expect(parseSettingsYaml("a: 2026-12-03\nb: yes\nc: false\nd: 0\ne: ~\nf: 0x10")).toEqual({
      a: "2026-12-03",
      b: "yes",
      c: false,
      d: 0,
      e: null,
      f: 16,
    });
    expect(parseSettingsYaml("false")).toBe(false);
    expect(parseSettingsYaml('{"images": {"inspect": false}}')).toEqual({
      images: { inspect: false },
    });
  });

  it("refuses a duplicated key and a type tag beyond the core schema, naming the place", () => {
    expect(() => parseSettingsYaml("mode: warn\nmode: deny")).toThrow(/duplicated mapping key/);
    expect(() => parseSettingsYaml("mode: !!timestamp 2026-12-03")).toThrow(/unknown tag/);
  });

  it("a per-key variable that YAML reads as false or 0 is that value", () => {
    const s = settingsFromEnv({
      ADMISSION_GUARD_IMAGES_INSPECT: "false",
      ADMISSION_GUARD_IMAGES_LAYER_BYTES: "0",
    });
    expect(s.images.inspect).toBe(false);
    expect(s.images.layerBytes).toBe(0);
  });
});

describe("settings from a file", () => {
  it("accepts the defaults and a valid file", () => {
    // The defaults the README documents, value by value.
    expect(defaultSettings()).toMatchObject({
      mode: "enforce",
      ignoredNamespaces: [],
      securityContext: {
        runAsUser: 1000,
        runAsGroup: 3000,
        homePath: "/home/workload",
        readOnlyRootFilesystem: "off",
        writablePaths: ["/tmp"],
      },
      images: { inspect: true, plainHttp: [], budgetMs: 2000, credentialsSecrets: [] },
      serviceAccount: { name: "workload", secretAccess: "warn" },
      resourceQuota: { onUnavailable: "allow" },
      registries: { allowed: [], mirrors: {} },
      workloads: { mutate: false },
      exemptions: { namespace: "admission-guard-exemptions", maxLifetimeDays: 90 },
      payload: { maxObjectBytes: 1048576 },
    });
    expect(
      parseSettings({ registries: { allowed: ["localhost:5000/team"] } }).registries.allowed,
    ).toEqual(["localhost:5000/team"]);
  });

  it("says where in the file, without an environment variable", () => {
    expect(
      problems(() =>
        parseSettings({ registries: { allowed: ["ghcr.io/x:1"] } }, "settings.yaml"),
      )[0],
    ).toMatch(/^registries\.allowed\[0\]: "ghcr\.io\/x:1" is not/);
  });
});

describe("settings read when the module is built", () => {
  const build = { PEPR_MODE: "build" };
  it("the watcher's bindings: wanted unless reports and events are both off", () => {
    expect(backgroundBindingsWanted({}, build)).toBe(true);
    const off = {
      ADMISSION_GUARD_REPORTS_ENABLED: "false",
      ADMISSION_GUARD_EVENTS_ENABLED: "false",
    };
    expect(backgroundBindingsWanted(off, build)).toBe(false);
    expect(
      backgroundBindingsWanted({ ...off, ADMISSION_GUARD_EVENTS_ENABLED: "true" }, build),
    ).toBe(true);
    // The build's own environment wins over package.json pepr.env, as for workloads.mutate.
    expect(
      backgroundBindingsWanted(off, { ...build, ADMISSION_GUARD_REPORTS_ENABLED: "true" }),
    ).toBe(true);
    // A bad value is reported at start-up; at build time it keeps the bindings.
    expect(backgroundBindingsWanted({ ADMISSION_GUARD_REPORTS_ENABLED: "maybe" }, build)).toBe(
      true,
    );
  });

  it("reports and events settings are validated like the others", () => {
    expect(
      problems(() => settingsFromEnv({ ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS: "0" })),
    ).toEqual([
      expect.stringMatching(
        /^reports\.intervalSeconds \(ADMISSION_GUARD_REPORTS_INTERVAL_SECONDS\): /,
      ),
    ]);
    expect(
      problems(() => settingsFromEnv({ ADMISSION_GUARD_EXEMPTIONS_NAMESPACE: "Not_A_Namespace" })),
    ).toEqual([
      expect.stringContaining("exemptions.namespace (ADMISSION_GUARD_EXEMPTIONS_NAMESPACE)"),
    ]);
  });
});

describe("zod's own messages", () => {
  // The schemas are written with zod/mini (a smaller module Secret), which alone says only "Invalid
  // input": lib/objects/zod-messages.ts sets English. These are the words classic zod said.
  it("names the key, what was expected and the value, in English", () => {
    expect(
      problems(() =>
        parseSettings({
          mode: "bogus",
          ignoredNamespaces: "ml",
          securityContext: { runAsUser: 0, runAsGroup: 1.5, homePath: 7 },
          webhooks: { failurePolicy: "fail" },
          images: { budgetMs: 9000 },
          labels: { enabled: "yes" },
          serviceAccount: { allowedNames: Array.from({ length: 101 }, (_, i) => `sa-${i}`) },
          sharedMemory: { sizeFraction: 0, defaultSizeLimit: true },
          registries: { mirrors: [] },
          workloads: {
            kinds: [
              {
                apiVersion: "example.com/v1",
                kind: "Run",
                templates: [
                  { template: "spec.template", replicas: [{ path: "spec.n", extra: 1 }] },
                ],
              },
            ],
          },
          namespaceKeysPolicy: { adminGroups: [""] },
          exemptions: { maxLifetimeDays: 4000 },
          events: { perSecond: 2000 },
          payload: { maxVolumes: -1 },
        }),
      ),
    ).toEqual([
      'mode: Invalid option: expected one of "enforce"|"warn"|"audit"|"off" (got "bogus")',
      'ignoredNamespaces: Invalid input: expected array, received string (got "ml")',
      "securityContext.runAsUser: Too small: expected number to be >=1 (got 0)",
      "securityContext.runAsGroup: Invalid input: expected int, received number (got 1.5)",
      "securityContext.homePath: Invalid input: expected string, received number (got 7)",
      'webhooks.failurePolicy: Invalid option: expected one of "Fail"|"Ignore" (got "fail")',
      "images.budgetMs: Too big: expected number to be <=8000 (got 9000)",
      'labels.enabled: Invalid input: expected boolean, received string (got "yes")',
      "serviceAccount.allowedNames: Too big: expected array to have <=100 items",
      "sharedMemory.sizeFraction: Too small: expected number to be >0 (got 0)",
      "sharedMemory.defaultSizeLimit: Invalid input (got true)",
      "registries.mirrors: Invalid input: expected record, received array",
      'unknown setting "workloads.kinds[0].templates[0].replicas[0].extra"',
      'namespaceKeysPolicy.adminGroups[0]: Too small: expected string to have >=1 characters (got "")',
      "exemptions.maxLifetimeDays: Too big: expected number to be <=3650 (got 4000)",
      "events.perSecond: Too big: expected number to be <=1000 (got 2000)",
      "payload.maxVolumes: Too small: expected number to be >=0 (got -1)",
    ]);
  });
});
