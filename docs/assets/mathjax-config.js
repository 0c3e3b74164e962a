// Typesets the \( \) and \[ \] spans that pymdownx.arithmatex (generic mode) leaves in the
// page. Only those spans: the rest of the page is never scanned for dollar signs.
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]],
        processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"},
};

// mkdocs-material swaps pages without reloading them (instant navigation).
if (window.document$) {
  document$.subscribe(() => {
    if (window.MathJax.typesetPromise) {
      MathJax.startup.output.clearCache();
      MathJax.typesetClear();
      MathJax.texReset();
      MathJax.typesetPromise();
    }
  });
}
