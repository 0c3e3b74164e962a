// TeX to MathML with Temml, for the whole build in one process (scripts/pages/mathml.py).
// Each line in is a page's formulas, [{"tex": "...", "display": true}, ...]; each line out
// is, in the same order, [{"mathml": "<math>...</math>"} or {"error": "..."}, ...]. It ends
// when its input does. Temml is the root package.json's dependency (npm ci).
"use strict";
let temml;
try {
  temml = require("temml");
} catch {
  process.stderr.write("Temml is not installed: run `npm ci` (or `make setup`)\n");
  process.exit(3);
}

require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const results = JSON.parse(line).map(({ tex, display }) => {
    try {
      // Temml's defaults: no trust (\class, \style, \data are refused), one row per
      // formula, at most 1000 macro expansions.
      return { mathml: temml.renderToString(tex, { displayMode: display, throwOnError: true }) };
    } catch (error) {  // a ParseError, or any other failure on this formula alone
      return { error: String(error.message || error).split("\n")[0].trim() };
    }
  });
  process.stdout.write(JSON.stringify(results) + "\n");
});
