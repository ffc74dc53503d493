// A copy of the module's sources under .e2e/<name> (inside the repository, so its bundle finds
// node_modules), to change as a user would — add a capability — and bundle as `pepr build` does
// (esbuild, Pepr and its dependencies external, CommonJS). For tests of the module's shape.
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { REPO_ROOT } from "./controller";

const SOURCES = ["pepr.ts", "hello-pepr.ts", "package.json", "capabilities", "lib", "cli", "bin"];

export interface ModuleCopy {
  dir: string;
  /** Reads a file of the copy. */
  read(path: string): string;
  write(path: string, text: string): void;
  /** Bundles the copy's pepr.ts; returns the bundle's path. */
  bundle(): Promise<string>;
  remove(): void;
}

export function copyModule(name: string): ModuleCopy {
  const dir = join(REPO_ROOT, ".e2e", name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const source of SOURCES)
    cpSync(join(REPO_ROOT, source), join(dir, source), { recursive: true });
  const copy: ModuleCopy = {
    dir,
    read: path => readFileSync(join(dir, path), "utf8"),
    write: (path, text) => {
      mkdirSync(join(dir, path, ".."), { recursive: true });
      writeFileSync(join(dir, path), text);
    },
    async bundle() {
      const peprPkg = JSON.parse(
        readFileSync(join(REPO_ROOT, "node_modules/pepr/package.json"), "utf8"),
      );
      const outfile = join(dir, "dist", "module.js");
      await build({
        absWorkingDir: dir,
        bundle: true,
        entryPoints: ["pepr.ts"],
        external: [...Object.keys(peprPkg.dependencies), "pepr", "@kubernetes/client-node"],
        format: "cjs",
        keepNames: true,
        outfile,
        platform: "node",
        logLevel: "warning",
      });
      return outfile;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  return copy;
}
