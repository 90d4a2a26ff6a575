// ESLint for the page's modules (boss_agent/controlplane/static/): plain ES modules in a
// browser, the service worker a classic script in its own scope. scripts/test.sh runs
// it with the eslint it installs into .tools-js/; the rule set is ESLint's recommended.
import { createRequire } from "node:module";

const require = createRequire(process.argv[1]);  // resolve from the eslint being run (.tools-js/)
const js = require("@eslint/js");
const globals = require("globals");

export default [
  js.configs.recommended,
  {
    files: ["boss_agent/controlplane/static/*.js"],
    languageOptions: { ecmaVersion: 2024, sourceType: "module", globals: globals.browser },
    rules: { eqeqeq: ["error", "smart"], "no-var": "error", "prefer-const": "error" },
  },
  {
    files: ["boss_agent/controlplane/static/sw.js"],
    languageOptions: { sourceType: "script", globals: globals.serviceworker },
  },
];
