// Issue 26's operational doors through the real built controller: a tenant's own ownerReferences
// make nothing skip, and the drain is the preStop hook's (an exec calling 127.0.0.1) and holds no
// socket when called again. That another pod's call gets 404 and changes nothing is unit-tested
// with fake peers (test/unit/threats/doors.test.ts): here every connection is loopback.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent } from "node:https";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../lib/objects/pod";
import { DRAIN_MS, DRAIN_PATH } from "../../lib/pepr/webhook-body-limit";
import {
  admit,
  podCreateReview,
  REPLICASET_CONTROLLER,
  workloadReview,
} from "../support/admission";
import { useEnvironment } from "../support/environment";
import { sendHttps } from "../support/https";
import { moduleYamlPath } from "../support/module-rbac";
import { clusterObjects, DEMO_NS } from "./cases";

const exec = promisify(execFile);
const env = useEnvironment({ objects: clusterObjects });
const NS = DEMO_NS;

/** A privileged ReplicaSet whose author wrote a controller ownerReference to a ConfigMap of theirs. */
const forgedReplicaSet = (): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  metadata: {
    name: "miner",
    namespace: NS,
    ownerReferences: [
      { apiVersion: "v1", kind: "ConfigMap", name: "mine", uid: "u-1", controller: true },
    ],
  },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "miner" } },
    template: {
      metadata: { labels: { app: "miner", "app.kubernetes.io/component": "miner" } },
      spec: {
        containers: [
          { name: "m", image: "ghcr.io/org/miner:1", securityContext: { privileged: true } },
        ],
      },
    },
  },
});

describe("made by a controller: only a controller's word counts", () => {
  it("a tenant's ReplicaSet with its own controller ownerReference is judged, and denied", async () => {
    const result = await admit(env.controller, forgedReplicaSet(), {
      userInfo: { username: "alice@example.com", groups: ["system:authenticated"] },
    });
    expect(result.allowed).toBe(false);
    expect(result.message).toContain("admission-guard/security-context: privileged");
  });

  it("the same from Kubernetes' ReplicaSet controller is its owner's copy: admitted (its pods are judged)", async () => {
    const answer = await env.controller.validate(
      workloadReview(forgedReplicaSet(), "CREATE", undefined, { userInfo: REPLICASET_CONTROLLER }),
    );
    expect(answer.response?.allowed).toBe(true);
  });
});

describe("the answers, as the API server reads them", () => {
  it("carry no ETag (express would hash each answer) and no X-Powered-By: the start-up mend took in the built controller", async () => {
    const client = new Agent({ keepAlive: true, ca: env.api.certs.caPem });
    try {
      const pod: KubeObject = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "plain-answer", namespace: NS },
        spec: { containers: [{ name: "app", image: "busybox:1.36" }] },
      };
      for (const step of ["mutate", "validate"])
        for (const path of [`/${step}/${env.controller.apiPath}`, "/healthz"]) {
          const reply = await sendHttps(env.controller.url + path, {
            method: path === "/healthz" ? "GET" : "POST",
            agent: client,
            headers: { "content-type": "application/json" },
            body: path === "/healthz" ? undefined : JSON.stringify(podCreateReview(pod)),
          });
          expect(reply.status).toBe(200);
          expect(reply.headers.etag).toBeUndefined();
          expect(reply.headers["x-powered-by"]).toBeUndefined();
        }
    } finally {
      client.destroy();
    }
  });

  it("every start-up mend of Pepr took in the built controller (the bounded log's among them): none says it could not", () => {
    const logs = env.controller.logs();
    expect(logs).toContain('"msg":"'); // its log is there, as pino writes it
    expect(logs).not.toMatch(/"msg":"could not [^"]*Pepr/);
  });
});

describe("the drain, as the shipped preStop hook runs it", () => {
  const agent = () => new Agent({ keepAlive: true, ca: env.api.certs.caPem });

  it("the hook's own command drains the controller: answers carry Connection: close, and the hook returns after the drain", async () => {
    const admission = parseAllDocuments(readFileSync(moduleYamlPath(), "utf8"))
      .map(d => d.toJS() as KubeObject)
      .find(d => d.kind === "Deployment" && !String(d.metadata?.name).endsWith("-watcher"))!;
    const [command, ...args] = (
      admission.spec as {
        template: {
          spec: { containers: { lifecycle: { preStop: { exec: { command: string[] } } } }[] };
        };
      }
    ).template.spec.containers[0].lifecycle.preStop.exec.command;
    // The deployed controller listens on 3000; this one on a free port.
    const script = args[1].replace("port:3000", `port:${env.controller.port}`);
    expect(script).not.toBe(args[1]);
    const started = Date.now();
    const hook = exec(command === "node" ? process.execPath : command, [args[0], script]);
    const client = agent();
    try {
      // Before the drain is over: answered, and told to close the connection.
      await new Promise(r => setTimeout(r, 500));
      const during = await sendHttps(`${env.controller.url}/healthz`, {
        method: "GET",
        agent: client,
      });
      expect(during.status).toBe(200);
      expect(during.headers.connection).toBe("close");
      await hook; // exit 0: the drain answered 200
      expect(Date.now() - started).toBeGreaterThanOrEqual(DRAIN_MS - 100);
    } finally {
      client.destroy();
    }
  }, 20_000);

  it("a repeat drain holds no socket: fifty at once are each answered at once", async () => {
    const client = agent();
    try {
      const started = Date.now();
      const replies = await Promise.all(
        Array.from({ length: 50 }, () =>
          sendHttps(env.controller.url + DRAIN_PATH, {
            method: "GET",
            agent: client,
            timeoutMs: 3000,
          }),
        ),
      );
      expect(replies.map(r => r.status)).toEqual(Array(50).fill(200));
      expect(Date.now() - started).toBeLessThan(DRAIN_MS / 2);
      // Still answering reviews.
      expect((await env.controller.get("/healthz")).status).toBe(200);
    } finally {
      client.destroy();
    }
  });
});
