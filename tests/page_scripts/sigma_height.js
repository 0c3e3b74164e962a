// The first display Σ's height over its font size.
() => {
    const sum = [...document.querySelectorAll('.math-display mo')]
        .find(mo => mo.textContent === '\u2211');
    return sum.getBoundingClientRect().height / parseFloat(getComputedStyle(sum).fontSize);
}
