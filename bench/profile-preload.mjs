// Loaded into the controller by bench/profile.ts (NODE_OPTIONS=--import): a CPU profile of exactly
// the measured load. SIGUSR2 starts the V8 profiler, SIGUSR1 stops it and writes the profile to
// $PROFILE_OUT. (`node --cpu-prof` is refused in NODE_OPTIONS, and would profile the start-up too.)
import inspector from "node:inspector";
import fs from "node:fs";

const session = new inspector.Session();
session.connect();
process.on("SIGUSR2", () => session.post("Profiler.enable", () => session.post("Profiler.start")));
process.on("SIGUSR1", () =>
  session.post("Profiler.stop", (error, result) => {
    if (!error) fs.writeFileSync(process.env.PROFILE_OUT, JSON.stringify(result.profile));
  }),
);
