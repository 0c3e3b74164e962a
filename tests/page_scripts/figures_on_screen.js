// Every figure image of the article: the file it shows (a <picture> picks its source), how
// wide it is drawn (0 when hidden: the other palette's), and the link around it.
() => [...document.querySelectorAll('article img[src$=".svg"]')]
    .map(img => ({src: img.currentSrc || img.src, drawn: img.getBoundingClientRect().width,
    link: img.closest('a') ? img.closest('a').href : null,
    loaded: img.complete && img.naturalWidth > 0}))
