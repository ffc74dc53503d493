// The two front doors for pods whose images the tests' registry serves: the real controller,
// asked again until the image was read within the budget, and `check --inspect-images`' inspector
// over the same settings (parity). Shared by the e2e tests of image reads.
import { imageInspectorFor } from "../../lib/images/inspector";
import type { KubeObject } from "../../lib/objects/pod";
import { parseSettings, type SettingsInput } from "../../lib/settings";
import { admit } from "./admission";
import type { Environment } from "./environment";
import { checkParity } from "./parity";
import { eventually } from "./wait";

/** The controller's answer, then `check`'s over the same objects and settings: the differences. */
export function inspectedParity(env: Environment, settings: SettingsInput, pod: KubeObject) {
  const images = imageInspectorFor(parseSettings(settings, "test settings"));
  return checkParity(env.controller, pod, { objects: env.api.objects(), settings, images });
}

/** Admits the pod (dry run), asking again until its images were read within the budget. */
export function admittedOnceRead(env: Environment, pod: KubeObject, notSaid: string[] = []) {
  return eventually(
    async () => {
      const result = await admit(env.controller, pod, { dryRun: true });
      const said = result.warnings.join("\n");
      for (const text of ["did not answer within", ...notSaid]) expect(said).not.toContain(text);
      return result;
    },
    20_000,
    200,
  );
}
