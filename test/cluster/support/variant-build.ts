// The module built with other settings in package.json pepr.env, as a user who sets them builds it:
// `pepr build` with the build's environment carrying them (pepr.ts reads them at build time), into
// .e2e/<name> (inside the repo, so the bundle finds node_modules), then the build overlay of
// `npm run build` (scripts/build-overlay.ts). Used for settings that change the webhook rules
// (workloads.mutate).
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { captureOutput, REPO_ROOT } from "../../support/controller";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));

function run(command: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output = captureOutput(child, 1024 * 1024);
    child.on("error", fail);
    child.on("exit", code =>
      code === 0
        ? ok(output())
        : fail(new Error(`${command} ${args.join(" ")} exited ${code}:\n${output().slice(-4000)}`)),
    );
  });
}

/** Builds the module with these ADMISSION_GUARD_* settings; returns the output directory. */
export async function buildVariant(name: string, env: Record<string, string>): Promise<string> {
  const dir = join(REPO_ROOT, ".e2e", name);
  rmSync(dir, { recursive: true, force: true });
  const pepr = join(REPO_ROOT, "node_modules", ".bin", "pepr");
  const output = await run(pepr, ["build", "-o", dir], env);
  // pepr build exits 0 even when it fails to write the bundle.
  if (!existsSync(join(dir, `pepr-${pkg.pepr.uuid}.js`)))
    throw new Error(`pepr build wrote no bundle in ${dir}:\n${output.slice(-4000)}`);
  const overlay = join(REPO_ROOT, "scripts", "build-overlay.ts");
  await run(process.execPath, ["--import", "tsx", overlay, dir], env);
  return dir;
}
