// Whether each JAX call of the first screen's box ends inside the box (not scrolled yet).
() => {
    const box = document.querySelector('.takeaway .table-scroll');
    const right = box.getBoundingClientRect().right;
    return [...box.querySelectorAll('tbody td:nth-child(2) code')]
        .map(code => [code.textContent, code.getBoundingClientRect().right <= right + 1]);
}
