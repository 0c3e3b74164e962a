// The page's h2 sections, and those a visible table of contents beside the article links
// to (mkdocs.yml's toc.integrate: the page's sections in the navigation sidebar).
() => {
    const sidebar = document.querySelector('.md-sidebar--primary');
    const box = sidebar.getBoundingClientRect();
    const shown = box.width > 0 && box.left >= 0 && box.right <= innerWidth
        && sidebar.checkVisibility({visibilityProperty: true});
    return {sections: [...document.querySelectorAll('article h2[id]')].map(h => h.id),
            linked: shown ? [...sidebar.querySelectorAll('nav.md-nav--secondary a')]
                .filter(a => a.checkVisibility({visibilityProperty: true}))
                .map(a => a.hash.slice(1)) : []};
}
