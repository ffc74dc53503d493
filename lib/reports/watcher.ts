// The watcher's front door, as lib/pepr-adapter.ts is the webhook's: the Watch bindings of
// capabilities/reports call these actions with each Pod and workload Pepr's watcher sees, and they
// hand it to the report scan and the fix Events. Set up by pepr.ts; until then (and with reports
// and events off) the actions do nothing.
import type { KubernetesObject } from "kubernetes-fluent-client";
import { Log } from "pepr";
import type { FixEvents } from "../events";
import type { KubeObject } from "../pod";
import type { ReportScanner } from "./scanner";

let background: { scanner?: ReportScanner; events?: FixEvents } = {};

export function configureBackground(configured: typeof background): void {
  background = configured;
}

export function backgroundActions() {
  return {
    // A named function: Pepr logs an action by its callback's name.
    onWatchEvent: async function onWatchEvent(obj: KubernetesObject, phase: string) {
      const object = obj as KubeObject;
      try {
        if (phase === "DELETED") return background.scanner?.forget(object);
        await Promise.all([
          background.scanner?.observe(object),
          object.kind === "Pod" ? background.events?.onPod(object) : undefined,
        ]);
      } catch (e) {
        Log.warn(
          { error: String(e), kind: object.kind, name: object.metadata?.name },
          "scan failed",
        );
      }
    },
  };
}
