import typescriptEslint from "@typescript-eslint/eslint-plugin";
import tsParser from "@typescript-eslint/parser";
import path from "node:path";
import { fileURLToPath } from "node:url";
import js from "@eslint/js";
import { FlatCompat } from "@eslint/eslintrc";
import globals from "globals";
import { readFileSync } from "node:fs";

const __filename = fileURLToPath(import.meta.url);
const __dirname = path.dirname(__filename);
/**
 * lib/ layered one way: a folder imports only the folders below it in lib/layers.json (bottom
 * first), type imports included. One block per folder, generated from that one list; the unit test
 * test/unit/build/lib-layers.test.ts reads the same list. Why: docs/adr/0031-lib-layered-one-way.md
 */
const LAYERS = JSON.parse(readFileSync(path.join(__dirname, "lib/layers.json"), "utf8")).order;
const layerBlocks = LAYERS.map((folder, i) => {
  const above = LAYERS.slice(i + 1);
  return {
    files: [`lib/${folder}/**/*.ts`],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: above.length
            ? [
                {
                  regex: `^\\.\\./(${above.join("|")})(/.*)?$`,
                  message: `lib/${folder} is below ${above.join(", ")} in lib/layers.json: it may import ${i ? `only ${LAYERS.slice(0, i).join(", ")}` : "no other lib/ folder"} (docs/architecture.md)`,
                },
              ]
            : [],
        },
      ],
    },
  };
});

const compat = new FlatCompat({
  baseDirectory: __dirname,
  recommendedConfig: js.configs.recommended,
  allConfig: js.configs.all,
});

export default [
  {
    // CommonJS files jest loads itself (configs, the cluster suite's test sequencer).
    ignores: [
      "**/node_modules",
      "**/dist",
      "coverage",
      ".e2e",
      "bench/runs",
      "reports",
      ".stryker-tmp*",
      "jest.config.js",
      "jest.cluster.config.js",
      "jest.node.config.js",
      "jest.prometheus.config.js",
      "test/cluster/support/sequencer.js",
      "test/support/quiet-pepr.js",
      "test/support/mutation-fast-check.js",
    ],
  },
  ...compat.extends("eslint:recommended", "plugin:@typescript-eslint/recommended"),
  {
    plugins: {
      "@typescript-eslint": typescriptEslint,
    },

    languageOptions: {
      parser: tsParser,
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            "eslint.config.mjs",
            "stryker.config.mjs",
            "bin/*.mjs",
            "scripts/*.mjs",
            "bench/*.mjs",
          ],
          // The build guard is a small .mjs script outside tsconfig.
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 20,
        },
        tsconfigRootDir: __dirname,
        sourceType: "module",
      },
      globals: {
        ...globals.node,
      },
    },

    rules: {
      "@typescript-eslint/no-floating-promises": "error",
    },
  },
  {
    // The import boundary: a policy area's rules are pure functions over plain objects. Only its
    // index.ts (the Pepr capability) may reach Pepr and the adapter; no rule reaches into the
    // engine, the cluster I/O or the watcher (they call the rules, never the other way round).
    files: ["capabilities/**/*.ts"],
    ignores: ["capabilities/index.ts", "capabilities/*/index.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              // The engine's contract (Policy, RuleContext, RuleChange...) is what rules are written to.
              regex: "/lib/engine(/(?!policy$)[^/]+)?$",
              message: "rules do not call the engine: it calls them (see docs/architecture.md)",
            },
            {
              group: [
                "pepr",
                "kubernetes-fluent-client",
                "**/lib/pepr/*",
                "**/lib/cluster/live",
                "**/lib/cluster/dra-live",
                "**/lib/cluster/list-watch",
                "**/lib/cluster/watched-store",
                "**/lib/cluster/serving-runtime-cache",
                "**/lib/cluster/service-accounts",
                "**/lib/cluster/access-reviews",
                "**/lib/reports/*",
                "**/lib/webhooks/*",
                "**/lib/images/registry-client",
                "**/lib/images/credentials",
              ],
              message:
                "rules are pure: Pepr, cluster I/O and the watcher stay behind the capability's index.ts and the cluster view",
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  ...layerBlocks,
];
