// Typed settings: defaults here, overridden by the controller's environment (package.json
// `pepr.env`, Helm values) or by a settings file for `check`. Validated once at start-up: a bad
// setting stops start-up with a message naming it. Per-namespace choices (mode, required component,
// service account, registries) are labels/annotations read by the rules, see NS_KEYS.
//
// schema.ts: every setting, its default and its errors, composing the sections the features
// export; environment.ts: settings from the controller's environment; build-flags.ts: the settings
// that decide the module's bindings at build time. The namespace labels and annotations and the
// system namespaces (lib/objects/keys.ts) are re-exported: capabilities read them with the settings.
// yaml.ts: the one YAML reader of settings documents.
export * from "../objects/keys";
export * from "./schema";
export * from "./environment";
export * from "./build-flags";
export * from "./yaml";
