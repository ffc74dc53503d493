// The engine's own cost, in process: no HTTP, no Pepr, no JSON. Each seed pod (examples/) goes
// through the two webhook steps as Pepr runs them: mutate() once with every policy (each acts as
// it declares), then answer() with every policy on the pod as the mutation left it. Reports µs per request (p50,
// p99, mean) per step, and where the validating step's time goes, policy by policy (each policy's
// check timed alone, the rest is the engine's). Being in process, it compares across noisy machines
// better than the HTTP benchmarks; run it before and after a change, side by side.
//
//   npm run bench:engine                      10,000 rounds per pod
//   npm run bench:engine -- --rounds 2000
import { performance } from "node:perf_hooks";
import { policies } from "../capabilities";
import { SnapshotCluster } from "../lib/cluster/view";
import { answer, mutate, type EngineDeps } from "../lib/engine";
import type { KubeObject } from "../lib/objects/pod";
import { defaultSettings } from "../lib/settings";
import { seedWorkloads } from "../test/support/manifests";

const roundsArg = process.argv.indexOf("--rounds");
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 10_000;

const { workloads, cluster } = seedWorkloads();
const pods = workloads.map(w => w.object).filter(o => o.kind === "Pod");
// Images are not read here (that is a cache lookup in the webhook; bench:images measures it).
const settings = { ...defaultSettings(), images: { ...defaultSettings().images, inspect: false } };
const deps: EngineDeps = { settings, cluster: new SnapshotCluster(cluster), policies };

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

async function measure(
  step: (pod: KubeObject) => Promise<unknown>,
  inputs: KubeObject[],
  rounds = ROUNDS,
) {
  for (let i = 0; i < Math.min(500, rounds); i++) await step(inputs[i % inputs.length]); // warm-up
  const times: number[] = [];
  for (let i = 0; i < rounds * inputs.length; i++) {
    const t = performance.now();
    await step(inputs[i % inputs.length]);
    times.push((performance.now() - t) * 1000);
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99), mean, n: times.length };
}

async function main() {
  // The mutating step: the module's one Mutate action on its own copy, as Pepr runs it.
  const mutateStep = async (pod: KubeObject) => {
    const object = structuredClone(pod);
    await mutate({ object, operation: "CREATE", dryRun: false }, deps, policies);
    return object;
  };
  const mutated: KubeObject[] = [];
  for (const pod of pods) mutated.push(await mutateStep(pod));
  const validateStep = (pod: KubeObject) =>
    answer({ object: pod, operation: "CREATE", dryRun: false }, deps, policies);

  const m = await measure(mutateStep, pods);
  const v = await measure(validateStep, mutated);
  // Where the validating step's time goes: the same step's median without one policy's check
  // (ablation; a wrapper timing each check would cost as much as a small check; the median, as
  // the mean carries the machine's pauses). The engine's own part is what is left with no check.
  const withoutCheck = async (names: string[]) => {
    const saved = policies.map(p => p.check);
    policies.forEach(p => names.includes(p.name) && (p.check = undefined));
    try {
      return (await measure(validateStep, mutated)).p50;
    } finally {
      policies.forEach((p, i) => (p.check = saved[i]));
    }
  };
  const checking = policies.filter(p => p.check).map(p => p.name);
  const byPolicy = [];
  for (const name of checking) byPolicy.push([name, v.p50 - (await withoutCheck([name]))] as const);
  const engineOnly = await withoutCheck(checking);

  const fmt = (n: number) => n.toFixed(1).padStart(8);
  console.log(`${pods.length} seed pods, ${ROUNDS} rounds each, Node ${process.version}\n`);
  console.log("step       p50 µs   p99 µs  mean µs");
  console.log(
    `mutate   ${fmt(m.p50)} ${fmt(m.p99)} ${fmt(m.mean)}   (a structuredClone of the pod included)`,
  );
  console.log(`validate ${fmt(v.p50)} ${fmt(v.p99)} ${fmt(v.mean)}`);
  for (const [i, pod] of pods.entries()) {
    const one = await measure(validateStep, [mutated[i]]);
    console.log(`  ${String(pod.metadata?.name).padEnd(22)} validate p50 ${fmt(one.p50)} µs`);
  }
  console.log("\nthe validating step's median, by policy (the step without it, subtracted):");
  for (const [name, us] of [...byPolicy].sort((x, y) => y[1] - x[1]))
    console.log(`  ${name.padEnd(18)} ${fmt(us)} µs`);
  console.log(`  ${"engine, no check".padEnd(18)} ${fmt(engineOnly)} µs`);

  // A gang against a Deployment: the validating step (the fixes simulated on every template, every
  // check on each, the gang's quota) on the seeds' Deployment and on a RayCluster of a head and 64
  // worker groups. Issue 21's bound: the RayCluster under 10× the Deployment.
  const deployment = workloads.map(w => w.object).find(o => o.kind === "Deployment")!;
  const rayCluster = rayClusterOf(deployment, 64);
  const judge = (obj: KubeObject) =>
    answer({ object: obj, operation: "CREATE", dryRun: false }, deps, policies);
  const rounds = Math.max(200, Math.floor(ROUNDS / 10));
  const d = await measure(judge, [deployment], rounds);
  const r = await measure(judge, [rayCluster], rounds);
  const distinct = rayClusterOf(deployment, 64, true);
  const rd = await measure(judge, [distinct], Math.max(50, Math.floor(rounds / 4)));
  console.log(`\nworkloads (validate, ${rounds} rounds):`);
  console.log(`  Deployment ${String(deployment.metadata?.name).padEnd(26)} p50 ${fmt(d.p50)} µs`);
  console.log(
    `  RayCluster, 1 + 64 groups alike     p50 ${fmt(r.p50)} µs  ×${(r.p50 / d.p50).toFixed(1)} the Deployment`,
  );
  console.log(
    `  RayCluster, 1 + 64 groups distinct  p50 ${fmt(rd.p50)} µs  ×${(rd.p50 / d.p50).toFixed(1)} the Deployment (each template its own image tag: judged one by one)`,
  );
}

/** A RayCluster whose head and worker groups have the Deployment's pod template (distinct: each its own image tag). */
function rayClusterOf(deployment: KubeObject, groups: number, distinct = false): KubeObject {
  const template = (deployment.spec as { template: object }).template;
  const groupTemplate = (i: number) => {
    const t = structuredClone(template) as { spec: { containers: { image: string }[] } };
    if (distinct) t.spec.containers[0].image = `${t.spec.containers[0].image.split(":")[0]}:v${i}`;
    return t;
  };
  return {
    apiVersion: "ray.io/v1",
    kind: "RayCluster",
    metadata: { name: "ray-64", namespace: deployment.metadata?.namespace },
    spec: {
      headGroupSpec: { template: structuredClone(template) },
      workerGroupSpecs: Array.from({ length: groups }, (_, i) => ({
        groupName: `group-${i}`,
        replicas: 1,
        template: groupTemplate(i),
      })),
    },
  };
}

void main();
