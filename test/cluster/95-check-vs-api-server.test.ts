// `check` refuses, as an input error, what the API server would refuse (cli/schema.ts). Here the
// real kube-apiserver answers for each case of test/support/api-server-cases.ts: a server-side
// dry run of a create, with strict field validation as `kubectl apply` sends it (its decoding,
// defaulting, validation and admission; nothing stored). check's schemaProblems must give the same
// answer: accepted ⇔ no problems.
import { schemaProblems } from "../../cli/schema";
import type { KubeObject } from "../../lib/objects/pod";
import { knownDifferences, NS, serverCases, type ServerCase } from "../support/api-server-cases";
import { applyObjects, connect, defaultAccountMade, namespace } from "./support/cluster";
import { pathOf, statusMessage } from "./support/kube-client";

const cluster = connect();
afterAll(() => cluster.admin.close());

beforeAll(async () => {
  await applyObjects(cluster, [namespace(NS)]);
  await defaultAccountMade(cluster, NS);
});

/** The server's answer to a dry-run create: accepted, or its message. */
async function serverAnswer(object: KubeObject): Promise<{ accepted: boolean; message: string }> {
  // The collection's path (the object may have no name).
  const collection = pathOf({ ...object, metadata: { namespace: NS } });
  const res = await cluster.admin.create(collection, object, "?dryRun=All&fieldValidation=Strict");
  return { accepted: res.status < 300, message: statusMessage(res) || res.text };
}

const row = (c: ServerCase) => [c.name, c] as const;

test.each(serverCases.map(row))("%s: the server and check agree", async (_name, c) => {
  const server = await serverAnswer(c.object);
  // The fixture says what the server answers; the server's message shows when it does not.
  expect({ accepted: server.accepted, message: server.accepted ? "" : server.message }).toEqual({
    accepted: c.accepted,
    message: c.accepted ? "" : expect.any(String),
  });
  const problems = schemaProblems(c.object);
  expect(problems.length === 0 ? "accepted" : problems).toEqual(
    c.accepted ? "accepted" : expect.arrayContaining([expect.any(String)]),
  );
});

test.each(knownDifferences.map(row))(
  "known difference, %s: check answers the opposite of the server",
  async (_name, c) => {
    expect((await serverAnswer(c.object)).accepted).toBe(c.accepted);
    expect(schemaProblems(c.object).length === 0).toBe(!c.accepted);
  },
);
