// The one YAML reader of settings, for the controller's environment and `check --settings` alike,
// so that both doors read a document the same way. js-yaml with its YAML 1.2 core schema (what the
// `yaml` package parses by default: no timestamps, no `<<` merges), chosen for the bundle: the
// controller's module Secret must fit kubectl apply's annotation, and `yaml` took a quarter of it.
import { CORE_SCHEMA, load } from "js-yaml";

/** A YAML or JSON document as plain values; throws (with the parser's message) when it is not one. */
export function parseSettingsYaml(text: string): unknown {
  return load(text, { schema: CORE_SCHEMA });
}
