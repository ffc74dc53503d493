// Real ML image shapes under restricted (issue 46), through the real built controller and `check
// --inspect-images`' inspector (parity), with images as registries serve them (several gzip layers
// from test/support/layers.ts): a server on a privileged port (TGI's Env PORT=80, an EXPOSE 443)
// gets the low-port sysctl; an interpreter under /root is warned at admission with the fix.
import type { KubeObject } from "../../lib/objects/pod";
import { NS_KEYS } from "../../lib/objects/keys";
import { admit } from "../support/admission";
import { startEnvironment, type Environment } from "../support/environment";
import {
  GZIP,
  gnuTar,
  gzip,
  putLayeredImage,
  ROOT_BASE_FILES,
  type LayerFile,
} from "../support/layers";
import { admittedOnceRead, inspectedParity } from "../support/image-doors";
import { settingsEnv } from "../support/parity";
import { TestRegistry } from "../support/registry";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SYSCTL = "net.ipv4.ip_unprivileged_port_start";
const registry = new TestRegistry();
let env: Environment;
const settings = () => ({
  images: { inspect: true, plainHttp: [registry.host], budgetMs: 1500 },
});

const layer = (files: LayerFile[]) => ({ body: gzip(gnuTar(files)), mediaType: GZIP });

beforeAll(async () => {
  await registry.start();
  const base = layer(ROOT_BASE_FILES);
  const app = layer([{ path: "app" }, { path: "app/server.py", content: "serve()\n" }]);
  // TGI's shape: built as root, PORT=80 in Env, EXPOSE 80.
  putLayeredImage(
    registry,
    "ml/tgi",
    "1",
    { Env: ["PATH=/usr/local/bin:/usr/bin", "PORT=80"], ExposedPorts: { "80/tcp": {} } },
    [base, app],
  );
  // An image that EXPOSEs 443 and 8080 (only 443 is privileged).
  putLayeredImage(registry, "ml/https", "1", { ExposedPorts: { "8080/tcp": {}, "443/tcp": {} } }, [
    base,
    app,
  ]);
  // Miniconda installed under /root, on PATH, the entrypoint its python.
  putLayeredImage(
    registry,
    "ml/conda",
    "1",
    {
      Env: ["PATH=/root/miniconda3/bin:/usr/local/bin:/usr/bin"],
      Entrypoint: ["/root/miniconda3/bin/python"],
      Cmd: ["/app/server.py"],
    },
    [base, layer([{ path: "root", mode: 0o700 }, { path: "root/miniconda3" }]), app],
  );
  // A trainer built as root whose Env sends Hugging Face's cache into a root-owned /data/hf (which
  // may hold a model baked in) and MLflow's runs into /mlruns, which no layer makes (the runtime
  // would, root's).
  putLayeredImage(
    registry,
    "ml/hf",
    "1",
    {
      WorkingDir: "/",
      Env: ["HF_HOME=/data/hf", "MLFLOW_TRACKING_URI=file:///mlruns", "TORCH_HOME=/opt/torch"],
    },
    [
      base,
      layer([{ path: "data" }, { path: "data/hf", mode: 0o755 }]),
      layer([{ path: "opt" }, { path: "opt/torch", mode: 0o777 }]),
      app,
    ],
  );
  env = await startEnvironment({
    objects: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "ml" } },
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: {
          name: "old",
          labels: {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "v1.21",
          },
        },
      },
    ],
    env: { ...settingsEnv(settings()), ADMISSION_GUARD_IMAGES_INSPECT: "true" },
  });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  await registry.stop();
});

const server = (image: string, extra: Obj = {}, namespace = "ml"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "srv", namespace },
  spec: { containers: [{ name: "srv", image: `${registry.host}/${image}`, ...extra }] },
});

const parity = (pod: KubeObject) => inspectedParity(env, settings(), pod);
const admitted = (pod: KubeObject) => admittedOnceRead(env, pod, ["was not inspected"]);

describe("a server on a privileged port", () => {
  test("TGI's Env PORT=80: the pod gets the sysctl at 80, traced; restricted admits it; a second mutation adds nothing; check agrees", async () => {
    const result = await admitted(server("ml/tgi:1"));
    expect(result.allowed).toBe(true);
    const spec = result.patched.spec as Obj;
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 1000,
      sysctls: [{ name: SYSCTL, value: "80" }],
    });
    expect(spec.containers[0].securityContext.capabilities.drop).toEqual(["ALL"]);
    expect(result.patched.metadata?.annotations?.[NS_KEYS.fixed]).toContain(
      "security-context/lowPorts",
    );
    const again = await admit(env.controller, result.patched, { dryRun: true });
    expect(again.allowed).toBe(true);
    expect((again.patched.spec as Obj).securityContext.sysctls).toHaveLength(1);
    expect((await parity(server("ml/tgi:1"))).differences).toEqual([]);
  });

  test("EXPOSE 443 and 8080: the sysctl at 443; the container's own PORT=8080 does not lower it", async () => {
    const result = await admitted(server("ml/https:1", { env: [{ name: "PORT", value: "8080" }] }));
    expect((result.patched.spec as Obj).securityContext.sysctls).toEqual([
      { name: SYSCTL, value: "443" },
    ]);
    expect((await parity(server("ml/https:1"))).differences).toEqual([]);
  });

  test("the pod's own value above the port is kept and warned with the fix", async () => {
    const pod = server("ml/tgi:1");
    (pod.spec as Obj).securityContext = { sysctls: [{ name: SYSCTL, value: "1024" }] };
    const result = await admitted(pod);
    expect(result.allowed).toBe(true);
    expect((result.patched.spec as Obj).securityContext.sysctls).toEqual([
      { name: SYSCTL, value: "1024" },
    ]);
    expect(result.warnings).toContainEqual(
      expect.stringContaining(`but the pod sets ${SYSCTL}=1024`),
    );
  });

  test("a namespace that enforces restricted at v1.21: no sysctl, and a container dropping ALL itself is warned with the fix", async () => {
    const plain = await admitted(server("ml/tgi:1", {}, "old"));
    expect(plain.allowed).toBe(true);
    // Restricted asks for drop ALL from v1.22: the fix adds none, so the bind is the runtime's.
    expect(JSON.stringify(plain.patched.spec)).not.toContain(SYSCTL);
    const dropping = await admitted(
      server("ml/tgi:1", { securityContext: { capabilities: { drop: ["ALL"] } } }, "old"),
    );
    expect(JSON.stringify(dropping.patched.spec)).not.toContain(SYSCTL);
    expect(dropping.warnings).toContainEqual(
      expect.stringContaining(
        `container "srv" listens on port 80 (its image's EXPOSE 80) as a non-root UID with every capability dropped, and ${SYSCTL} is not set (namespace old enforces Pod Security restricted`,
      ),
    );
  });
});

describe("an interpreter under /root", () => {
  test("warned at admission naming PATH, the program and the fix; check agrees", async () => {
    const result = await admitted(server("ml/conda:1"));
    expect(result.allowed).toBe(true);
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        "keeps its interpreter or environment under /root (PATH /root/miniconda3/bin; program /root/miniconda3/bin/python), which is mode 700: run as UID 1000 it cannot start. Fix: install it outside /root",
      ),
    );
    expect((await parity(server("ml/conda:1"))).differences).toEqual([]);
  });
});

describe("Env-named cache dirs a root-built image leaves root's", () => {
  test("an absent MLflow store gets a writable emptyDir, traced; a root-owned HF_HOME (it may hold the image's files) is named with the fix, not mounted over; a world-writable TORCH_HOME neither; check agrees", async () => {
    const result = await admitted(server("ml/hf:1"));
    expect(result.allowed).toBe(true);
    const spec = result.patched.spec as Obj;
    const mounts = spec.containers[0].volumeMounts.map((m: Obj) => m.mountPath);
    expect(mounts).toContain("/mlruns");
    expect(mounts).not.toContain("/data/hf");
    expect(mounts).not.toContain("/opt/torch");
    expect(spec.volumes).toContainEqual({ name: "ag-writable-mlruns", emptyDir: {} });
    expect(result.warnings).toContainEqual(
      expect.stringContaining(
        "sets HF_HOME to /data/hf, a directory of root's (mode 755) that UID 1000 cannot write; it may hold what the image was built with, so no emptyDir is mounted over it. Fix: set HF_HOME to a writable path (under HOME), mount a writable volume at /data/hf",
      ),
    );
    expect(result.patched.metadata?.annotations?.[NS_KEYS.fixed]).toContain(
      "security-context/cacheDirs",
    );
    const again = await admit(env.controller, result.patched, { dryRun: true });
    expect(again.patched.spec).toEqual((again.request.object as Obj).spec);
    expect((await parity(server("ml/hf:1"))).differences).toEqual([]);
  });
});
