// The example capability (hello-pepr) is registered only where asked, by ADMISSION_GUARD_EXAMPLES,
// read when the module loads (capabilities/index.ts): a deployed module has none, and a name that
// is no example stops the load with the names known.
type Module = typeof import("../../../capabilities");

function loadWith(examples: string | undefined): Module {
  const saved = process.env.ADMISSION_GUARD_EXAMPLES;
  if (examples === undefined) delete process.env.ADMISSION_GUARD_EXAMPLES;
  else process.env.ADMISSION_GUARD_EXAMPLES = examples;
  try {
    let loaded: Module | undefined;
    jest.isolateModules(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      loaded = require("../../../capabilities") as Module;
    });
    return loaded!;
  } finally {
    process.env.ADMISSION_GUARD_EXAMPLES = saved;
  }
}

test("none unless asked: the module as deployed", () => {
  const { policies, examples } = loadWith(undefined);
  expect(examples).toEqual([]);
  expect(policies.map(p => p.name)).not.toContain("hello-pepr");
});

test("hello-pepr when asked, after the module's own areas", () => {
  const { policies, examples } = loadWith(" hello-pepr ");
  expect(examples.map(p => p.name)).toEqual(["hello-pepr"]);
  expect(policies.at(-1)?.name).toBe("hello-pepr");
});

test("a name that is no example stops the load, naming those known", () => {
  expect(() => loadWith("constructor")).toThrow(
    'ADMISSION_GUARD_EXAMPLES: no example capability "constructor" (known: hello-pepr)',
  );
});
