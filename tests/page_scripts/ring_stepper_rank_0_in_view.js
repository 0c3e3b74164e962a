box => {
    const card = box.querySelector('[data-rank="0"]').getBoundingClientRect();
    return card.left >= box.getBoundingClientRect().left &&
        card.right <= box.getBoundingClientRect().right;
}
