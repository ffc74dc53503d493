// Pods change after they are created: `kubectl set image` (a Pod UPDATE) and `kubectl debug` (an
// UPDATE of pods/ephemeralcontainers). Through the real controller against the stand-in, each
// answer compared with the offline review (`check`'s engine) of the same request.
import type { V1EphemeralContainer, V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../lib/objects/pod";
import { admit } from "../support/admission";
import { useEnvironment } from "../support/environment";
import { checkParity, settingsEnv } from "../support/parity";
import { node, resourceQuota } from "../unit/resource-quota/support";

const NS = "web-team";
const SETTINGS = { registries: { allowed: ["ghcr.io", "docker.io/library"] } };
const RESIZE_NS = "serving-team";
const env = useEnvironment({
  objects: [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    // For the in-place resizes: 3 of 4 CPUs used (1 by the pod), a node of 8.
    { apiVersion: "v1", kind: "Namespace", metadata: { name: RESIZE_NS } },
    resourceQuota(RESIZE_NS, "compute", { "requests.cpu": "4" }, { "requests.cpu": "3" }),
    node("n1", { cpu: "8", memory: "32Gi", pods: "110" }),
  ] as KubeObject[],
  env: settingsEnv(SETTINGS),
});

const manifest: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: NS, labels: { app: "web" } },
  spec: { containers: [{ name: "web", image: "ghcr.io/org/web:1.0" }] },
};

/** The pod as the API server stored it after both webhooks. */
let stored: KubeObject;

beforeAll(async () => {
  const created = await admit(env.controller, manifest);
  expect(created.allowed).toBe(true);
  stored = {
    ...created.patched,
    metadata: { ...created.patched.metadata, uid: "u-web", resourceVersion: "7" },
  };
});

function changed(edit: (spec: V1PodSpec, pod: KubeObject) => void): KubeObject {
  const pod = structuredClone(stored);
  edit(pod.spec as V1PodSpec, pod);
  return pod;
}

/** What `kubectl set image pod/web web=IMAGE` sends. */
const setImage = (image: string) =>
  changed(spec => {
    spec.containers[0].image = image;
  });

/** What `kubectl debug web --image=busybox:1.36 --profile=PROFILE` sends (the container it adds). */
function debug(
  name: string,
  securityContext?: V1EphemeralContainer["securityContext"],
): KubeObject {
  return changed(spec => {
    spec.ephemeralContainers = [
      ...(spec.ephemeralContainers ?? []),
      {
        name,
        image: "busybox:1.36",
        stdin: true,
        tty: true,
        targetContainerName: "web",
        terminationMessagePolicy: "File",
        terminationMessagePath: "/dev/termination-log",
        imagePullPolicy: "IfNotPresent",
        ...(securityContext && { securityContext }),
      },
    ];
  });
}

/** The UPDATE of `old` (default: the stored pod) to `pod`, through both front doors. */
async function update(pod: KubeObject, subResource?: string, old: KubeObject = stored) {
  const report = await checkParity(env.controller, pod, {
    objects: env.api.objects(),
    settings: SETTINGS,
    operation: "UPDATE",
    oldObject: old,
    subResource,
  });
  expect(report.differences).toEqual([]);
  return report.e2e;
}

describe("kubectl set image", () => {
  it("to a registry that is not allowed: denied, naming the container and the registry", async () => {
    const r = await update(setImage("evil.example.com/miner:latest"));
    expect(r.allowed).toBe(false);
    expect(r.message).toBe(
      'admission-guard/image-registry: container "web" image "evil.example.com/miner:latest" (evil.example.com/miner:latest) is from registry evil.example.com, which is not allowed; allowed: ghcr.io, docker.io/library. Fix: use an image from an allowed registry or its mirror (ghcr.io, docker.io/library) in spec.containers[0].image; if evil.example.com should be allowed, an admin adds it to registries.allowed (env ADMISSION_GUARD_REGISTRIES_ALLOWED, e.g. in package.json pepr.env); ' +
        "admission-guard: if the workload must run as it is, a platform admin (whoever may write Exemptions in namespace admission-guard-exemptions) can waive image-registry/registry-not-allowed for it with an Exemption (kubectl explain exemptions.spec)",
    );
  });

  it("to an allowed one: admitted, with nothing to say", async () => {
    const r = await update(setImage("ghcr.io/org/web:2.0"));
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });
});

describe("kubectl debug", () => {
  it("--profile=sysadmin (a privileged container): denied, saying which profile passes", async () => {
    const r = await update(debug("debugger-sys", { privileged: true }), "ephemeralcontainers");
    expect(r.allowed).toBe(false);
    expect(r.message).toMatch(
      /^admission-guard\/security-context: privileged: container "debugger-sys" must not set securityContext\.privileged=true/,
    );
    expect(r.message).toContain("with kubectl debug, use --profile=restricted");
    // Only the debug container is judged: the app container passed when it was created.
    expect(r.message).not.toContain('"web"');
  });

  it("--profile=general (no securityContext): denied for what restricted asks of the container", async () => {
    const r = await update(debug("debugger-gen"), "ephemeralcontainers");
    expect(r.allowed).toBe(false);
    expect(r.message).toContain(
      'container "debugger-gen" must set securityContext.allowPrivilegeEscalation=false',
    );
    expect(r.message).toContain("with kubectl debug, use --profile=restricted");
  });

  it("--profile=restricted: admitted", async () => {
    const r = await update(
      debug("debugger-ok", {
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"] },
        seccompProfile: { type: "RuntimeDefault" },
      }),
      "ephemeralcontainers",
    );
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);
  });

  it("an image from a registry that is not allowed: denied like any container", async () => {
    const pod = debug("debugger-evil", {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    (pod.spec as V1PodSpec).ephemeralContainers![0].image = "evil.example.com/tools:1";
    const r = await update(pod, "ephemeralcontainers");
    expect(r.allowed).toBe(false);
    expect(r.message).toMatch(
      /^admission-guard\/image-registry: ephemeral container "debugger-evil" image "evil\.example\.com\/tools:1"/,
    );
  });
});

describe("updates that change no container", () => {
  it("labels, annotations and finalizers: admitted without a word", async () => {
    const r = await update(
      changed((_spec, pod) => {
        pod.metadata!.labels = { ...pod.metadata!.labels, release: "canary" };
        pod.metadata!.annotations = { ...pod.metadata!.annotations, note: "x" };
        pod.metadata!.finalizers = ["example.com/keep"];
      }),
    );
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });

  it("never refused for what the pod had since its creation", async () => {
    // A pod admitted before the registry rule (or in warn mode): its image is not allowed today.
    const legacy = changed(spec => {
      spec.containers[0].image = "private-registry.com/web:1";
      spec.containers.push({ name: "helper", image: "ghcr.io/org/helper:1" });
    });
    const relabelled = structuredClone(legacy);
    relabelled.metadata!.labels = { app: "web", tier: "x" };
    const r = await update(relabelled, undefined, legacy);
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);

    // Another container's image changes: judged; the old image of "web" is not.
    const helperBumped = structuredClone(legacy);
    (helperBumped.spec as V1PodSpec).containers[1].image = "ghcr.io/org/helper:2";
    const bumped = await update(helperBumped, undefined, legacy);
    expect(bumped.message).toBe("");
    expect(bumped.allowed).toBe(true);
    expect(bumped.warnings).toEqual([]);
  });
});

describe("an object being deleted (a finalizer holds it): its deletionTimestamp is no pass", () => {
  /** What the API server stores once `kubectl delete` meets a finalizer. */
  const held = <T extends KubeObject>(obj: T, finalizers = ["example.com/hold"]): T => ({
    ...structuredClone(obj),
    metadata: {
      ...structuredClone(obj.metadata),
      finalizers,
      deletionTimestamp: "2026-12-01T00:00:00Z" as unknown as Date,
    },
  });

  it("kubectl set image on a deleted pod: judged as on any pod, denied", async () => {
    const r = await update(
      held(setImage("evil.example.com/miner:latest")),
      undefined,
      held(stored),
    );
    expect(r.allowed).toBe(false);
    expect(r.message).toMatch(
      /^admission-guard\/image-registry: container "web" image "evil\.example\.com\/miner:latest"/,
    );
  });

  it("its finalizer removed: admitted", async () => {
    const r = await update(held(stored, []), undefined, held(stored));
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([]);
  });

  const deployment = (image: string): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: NS, uid: "d-web", generation: 1 },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web", "app.kubernetes.io/component": "web" } },
        spec: { containers: [{ name: "web", image }] },
      },
    },
  });

  it("a deleted Deployment's template moved to a registry that is not allowed: denied", async () => {
    const r = await update(
      held(deployment("evil.example.com/miner:latest")),
      undefined,
      held(deployment("ghcr.io/org/web:1.0")),
    );
    expect(r.allowed).toBe(false);
    expect(r.message).toMatch(
      /^admission-guard\/image-registry: container "web" image "evil\.example\.com\/miner:latest"/,
    );
  });

  it("a deleted Deployment's finalizer removed (its template broke a rule all along): admitted", async () => {
    const evil = deployment("evil.example.com/miner:latest");
    const r = await update(held(evil, []), undefined, held(evil));
    expect(r.allowed).toBe(true);
  });
});

describe("kubectl patch --subresource resize (in-place resize, an UPDATE of pods/resize)", () => {
  /** The pod as stored, running on n1, asking `cpu`. */
  const server = (cpu: string): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "server", namespace: RESIZE_NS, uid: "u-server", resourceVersion: "9" },
    spec: {
      nodeName: "n1",
      serviceAccountName: "default",
      containers: [
        {
          name: "server",
          image: "ghcr.io/org/server:1",
          resources: { requests: { cpu }, limits: { cpu } },
        },
      ],
    },
  });
  const resize = (cpu: string, from = "1") => update(server(cpu), "resize", server(from));

  it("within the quota and the node: admitted", async () => {
    const r = await resize("2");
    expect(r.message).toBe("");
    expect(r.allowed).toBe(true);
  });

  it("past the namespace quota: denied for what the resize adds, with the fix", async () => {
    const r = await resize("3");
    expect(r.allowed).toBe(false);
    expect(r.message).toContain(
      "admission-guard/resource-quota: Pod serving-team/server exceeds the namespace quota: requests.cpu: the resize adds 2 (the pod asked 1), quota compute has 1 of 4 left (3 used). Fix: lower the pod's requests.cpu to at most 2",
    );
  });

  it("past its node's allocatable (the kubelet would leave it Infeasible): denied", async () => {
    const r = await resize("12");
    expect(r.allowed).toBe(false);
    expect(r.message).toContain("Pod serving-team/server fits no node");
    expect(r.message).toContain('node "n1"');
  });

  it("a shrink: admitted", async () => {
    expect((await resize("1", "3")).allowed).toBe(true);
  });
});
