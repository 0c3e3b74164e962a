// TeX to MathML with Temml, for every formula of a page at once (scripts/pages/mathml.py).
// Reads [{"tex": "...", "display": true}, ...] on stdin and writes, in the same order,
// [{"mathml": "<math>...</math>"} or {"error": "..."}, ...] on stdout: one process per
// page, never one per formula. Temml is the root package.json's dependency (npm ci).
"use strict";
let temml;
try {
  temml = require("temml");
} catch {
  process.stderr.write("Temml is not installed: run `npm ci` (or `make setup`)\n");
  process.exit(3);
}

const chunks = [];
process.stdin.on("data", (chunk) => chunks.push(chunk));
process.stdin.on("end", () => {
  const formulas = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const results = formulas.map(({ tex, display }) => {
    try {
      // Temml's defaults: no trust (\class, \style, \data are refused), one row per
      // formula, at most 1000 macro expansions.
      return { mathml: temml.renderToString(tex, { displayMode: display, throwOnError: true }) };
    } catch (error) {  // a ParseError, or any other failure on this formula alone
      return { error: String(error.message || error).split("\n")[0].trim() };
    }
  });
  process.stdout.write(JSON.stringify(results));
});
