// @ts-check
/**
 * The layers of services/cognition/src, top to bottom, as forbidden imports: a folder imports only the
 * folders below it (docs/architecture.md). Each rule says why in one line.
 * @type {import('dependency-cruiser').IForbiddenRuleType[]}
 */
module.exports = [];
