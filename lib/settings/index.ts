// Typed settings: defaults here, overridden by the controller's environment (package.json
// `pepr.env`, Helm values) or by a settings file for `check`. Validated once at start-up: a bad
// setting stops start-up with a message naming it. Per-namespace choices (mode, required component,
// service account, registries) are labels/annotations read by the rules, see NS_KEYS.
//
// keys.ts: the namespace labels and annotations, the system namespaces; schema.ts: every setting,
// its default and its errors; environment.ts: settings from the controller's environment;
// build-flags.ts: the settings that decide the module's bindings at build time.
export * from "./keys";
export * from "./schema";
export * from "./environment";
export * from "./build-flags";
