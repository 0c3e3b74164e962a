async ([within, impacts]) => {
    const result = await axe.run(within === 'document' ? document : within,
                                 {resultTypes: ['violations']});
    return result.violations.filter(v => impacts.includes(v.impact))
        .flatMap(v => v.nodes.map(node => {
            const data = (node.any[0] || node.all[0] || {}).data || {};
            const colours = data.fgColor ? ` ${data.fgColor} on ${data.bgColor}` : '';
            return {key: v.id + colours, where: node.target.join(' ')};
        }));
}
