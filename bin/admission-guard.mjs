#!/usr/bin/env node
// `npx admission-guard check ...`: runs the TypeScript sources directly through tsx, so the
// command works right after `npm ci`, with no build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
