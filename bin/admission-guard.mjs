#!/usr/bin/env node
// `npx admission-guard check ...`: runs the TypeScript sources directly through tsx, so the
// command works right after `npm ci`, with no build step. The sources are CommonJS to Node (the
// package has no "type": "module"), so they are loaded through tsx's require hook.
import { createRequire } from "node:module";
import { register } from "tsx/cjs/api";

// `check ... | head` closes the pipe early: stop quietly, as other command-line tools do.
process.stdout.on("error", error => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});

// The capabilities `check` reads are Pepr capabilities: loading them loads Pepr, whose logger
// prints each binding it configures on stdout, which is check's report. Not a log line of it is
// check's business.
process.env.LOG_LEVEL = "silent";

register();
const { main } = createRequire(import.meta.url)("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
