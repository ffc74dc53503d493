// The last step of `npm run build`: applies the build overlay (scripts/overlay/entries.ts, what the
// module adds to what `pepr build` writes) to dist/, or to the directory given as the first argument
// (a variant build, test/cluster/support/variant-build.ts). The monitoring sources are
// deploy/monitoring/, or the directory given as the second argument; the cloud identity the install
// carries, deploy/cloud-identity.yaml, or the file given as the third.
//
//   tsx scripts/build-overlay.ts [dist] [monitoring-sources] [cloud-identity-values]
//
// Settings are read as the deployed controller reads them (lib/settings): package.json pepr.env,
// over which the build's own environment may set a value, as `pepr build` does. Nothing is written
// unless every entry applies.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { routesOf } from "../lib/engine/routes";
import { backgroundBindingsWanted, moduleEnvironment, settingsFromEnv } from "../lib/settings";
import { BuildOutput } from "./overlay/apply";
import { readCloudIdentity } from "./overlay/cloud-identity";
import { overlay, type PeprConfig, type WebhookClient } from "./overlay/entries";

function fail(message: string): never {
  console.error(`build overlay: ${message}`);
  process.exit(1);
}

// The repository: this file's folder's parent (tsx runs it as CommonJS, so __dirname is set).
const REPO = pathToFileURL(`${resolve(__dirname, "..")}/`);

/** A directory given on the command line, as a URL that ends in a slash. */
const directory = (arg: string | undefined, fallback: string) =>
  arg ? pathToFileURL(`${resolve(arg)}/`) : new URL(fallback, REPO);

/** How a webhook of Pepr's manifest reaches the controller (both strings, or the build fails). */
function webhookClientOf(output: BuildOutput, kind: string, name: string): WebhookClient {
  const select = { kind, name: `pepr-${name}` };
  const read = (...path: (string | number)[]) => {
    const value = output.read(select, ["webhooks", 0, "clientConfig", ...path]);
    if (typeof value !== "string" || !value)
      throw new Error(`${kind}: no clientConfig.${path.join(".")} in the manifest`);
    return value;
  };
  return { path: read("service", "path"), caBundle: read("caBundle") };
}

function main(): void {
  const { pepr }: { pepr: PeprConfig } = JSON.parse(
    readFileSync(new URL("package.json", REPO), "utf8"),
  );
  const dist = directory(process.argv[2], "dist/");
  const buildEnv = { ...process.env, PEPR_MODE: "build" };
  /** The entry being applied, named in an error. */
  let applying: string | undefined;
  try {
    const settings = settingsFromEnv(moduleEnvironment(pepr.env ?? {}, buildEnv));
    // The capabilities, as `pepr build` loaded them (Pepr's own start-up lines kept quiet).
    process.env.LOG_LEVEL ??= "warn";
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { policies, validators } = require("../capabilities") as typeof import("../capabilities");
    const output = new BuildOutput(dist, pepr.uuid);
    const entries = overlay({
      pepr,
      settings,
      routes: routesOf(policies, settings, validators),
      webhookClients: {
        mutate: webhookClientOf(output, "MutatingWebhookConfiguration", pepr.uuid),
        validate: webhookClientOf(output, "ValidatingWebhookConfiguration", pepr.uuid),
      },
      watcher: backgroundBindingsWanted(pepr.env ?? {}, buildEnv),
      monitoringSources: directory(process.argv[3], "deploy/monitoring/"),
      cloudIdentity: readCloudIdentity(
        process.argv[4]
          ? pathToFileURL(resolve(process.argv[4]))
          : new URL("deploy/cloud-identity.yaml", REPO),
      ),
    });
    for (const entry of entries) {
      applying = entry.name;
      output.apply(entry);
    }
    applying = undefined;
    output.write();
    for (const entry of entries) console.log(`${entry.name}: ${entry.summary}`);
  } catch (e) {
    fail(`${applying ? `${applying}: ` : ""}${(e as Error).message}`);
  }
}

main();
