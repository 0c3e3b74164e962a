// What breaks a page for a reader: the document scrolls sideways; a box of the article
// shows a vertical scrollbar; an element out of the flow inside a box that scrolls has its
// containing block outside that box (so it widens the page); a table box scrolls though
// its table fits, or at all at a desktop width (hiding columns); a code block scrolls that
// the build did not make focusable (pages/layout.py); prose became table rows or cells.
(desktop) => {
    const defects = [], root = document.documentElement;
    if (root.scrollWidth > root.clientWidth)
        defects.push(`the page scrolls sideways by ${root.scrollWidth - root.clientWidth} px`);
    const label = box => box.getAttribute('aria-label') || box.textContent.slice(0, 40);
    const name = element => element.tagName.toLowerCase()
        + [...element.classList].map(kind => `.${kind}`).join('') + ' "'
        + label(element).replace(/\s+/g, ' ').trim().slice(0, 40) + '"';
    const scrolls = (element, style, axis) => ['auto', 'scroll'].includes(style[`overflow${axis}`])
        && element[`scroll${axis == 'X' ? 'Width' : 'Height'}`]
            > element[`client${axis == 'X' ? 'Width' : 'Height'}`];
    const article = document.querySelector('article');
    for (const element of article.querySelectorAll('*')) {
        if (!element.getClientRects().length) continue;  // not drawn
        const style = getComputedStyle(element);
        if (scrolls(element, style, 'Y'))
            defects.push(`${name(element)} scrolls vertically by `
                         + `${element.scrollHeight - element.clientHeight} px`);
        if (style.position !== 'absolute' && style.position !== 'fixed') continue;
        for (let box = element.parentElement; box !== article; box = box.parentElement) {
            const boxStyle = getComputedStyle(box);
            if ((scrolls(box, boxStyle, 'X') || scrolls(box, boxStyle, 'Y'))
                    && (style.position === 'fixed' || !element.offsetParent
                        || !box.contains(element.offsetParent)))
                defects.push(`${name(element)} leaves its scroll box ${name(box)}`);
        }
    }
    for (const box of document.querySelectorAll('.table-scroll')) {
        const table = box.querySelector('table');
        const needed = Math.ceil(table.getBoundingClientRect().width);
        if (box.scrollWidth > Math.max(box.clientWidth, needed) + 1)
            defects.push(`table box wider than its table: ${label(box)} `
                         + `(${box.scrollWidth} px for a ${needed} px table)`);
        if (desktop && box.scrollWidth > box.clientWidth + 1)
            defects.push(`table hides columns at ${innerWidth} px: ${label(box)} `
                         + `(${box.scrollWidth - box.clientWidth} px)`);
        for (const row of table.querySelectorAll('tbody tr')) {
            const cells = [...row.cells].map(cell => cell.innerText.trim());
            if (cells.length > 1 && cells[0] && cells.slice(1).every(text => !text))
                defects.push(`prose read as a table row: "${cells[0].slice(0, 60)}"`);
            for (const text of cells)
                if (text.split(/\s+/).length > 30)
                    defects.push(`prose in a table cell: "${text.slice(0, 60)}"`);
        }
    }
    for (const row of document.querySelectorAll('.math-display'))  // its parts wrap
        if (row.scrollWidth > row.clientWidth + 1)
            defects.push(`display formula wider than its row: ${label(row)}`);
    for (const code of document.querySelectorAll('pre > code'))
        if (code.scrollWidth > code.clientWidth + 1 && !code.hasAttribute('data-wide'))
            defects.push(`code block scrolls but the build did not make it focusable: `
                         + `${code.id} "${code.textContent.slice(0, 40)}"`);
    return defects;
}
