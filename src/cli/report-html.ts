import type { CheckRecord, EndpointRecord, QualificationEvidence } from './evidence.js';
import { duration } from './format.js';

/** Text for HTML content and attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

const STYLE = `
:root { color-scheme: light; --pass: #17663a; --pass-bg: #e3f4e9; --fail: #a1161f; --fail-bg: #fbe5e6; --line: #d5d9de; --muted: #59616b; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1.25rem; color: #1c2127; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; } h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; } h3 { font-size: 1rem; margin: 1.25rem 0 .4rem; }
.verdict { display: inline-block; font-weight: 700; padding: .2rem .6rem; border-radius: .3rem; }
.passed { color: var(--pass); background: var(--pass-bg); } .failed, .interrupted { color: var(--fail); background: var(--fail-bg); } .not_applicable { color: var(--muted); background: #eef0f2; }
.note { color: var(--muted); margin: .4rem 0 0; }
table { border-collapse: collapse; width: 100%; margin: .25rem 0 1rem; }
th, td { border: 1px solid var(--line); padding: .35rem .55rem; text-align: left; vertical-align: top; }
thead th { background: #f3f5f7; } table.identities th { width: 16rem; background: #f8f9fa; font-weight: 600; }
td.result { font-weight: 700; white-space: nowrap; } td.num, td.duration { white-space: nowrap; text-align: right; }
code, pre { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.check-title { color: var(--muted); font-size: .9em; }
details { margin: .3rem 0; } summary { cursor: pointer; }
pre { background: #f6f8fa; border: 1px solid var(--line); padding: .6rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
`;

/** One self-contained page: inline CSS, no script, no external resource; every value escaped. */
export function renderReport(evidence: QualificationEvidence): string {
  const { summary } = evidence;
  const verdict = evidence.result.toUpperCase();
  return htmlPage(
    `Hermes AIP qualification: ${verdict}`,
    `<header>
<h1>Hermes Agent AIP connector qualification</h1>
<p><span id="verdict" class="verdict ${escapeHtml(evidence.result)}">${escapeHtml(verdict)}</span>
${summary.passed} of ${summary.checks} checks passed on ${summary.endpoints} endpoint${summary.endpoints === 1 ? '' : 's'}, ${escapeHtml(duration(evidence.duration_ms))}.</p>
<p class="note">${escapeHtml(evidence.target.note)}</p>
</header>
<section>
<h2>Checks</h2>
<table id="checks">
<thead><tr><th>Endpoint</th><th>#</th><th>Check</th><th>Result</th><th>Duration</th><th>Reason</th></tr></thead>
<tbody>
${evidence.endpoints.flatMap((endpoint) => endpoint.checks.map((check) => checkRow(endpoint, check))).join('\n')}
</tbody>
</table>
</section>
<section>
<h2>Identities</h2>
${identityTable('identities', [
  ['Qualification id', evidence.qualification_id],
  ['Target', `${targetText(evidence)}; ${evidence.target.config_source}`],
  ['AIP protocol version', evidence.identities.aip_protocol_version],
  ['Contracts digest', evidence.identities.contracts_digest],
  ['Pinned Hermes revision', evidence.identities.hermes_pinned_revision],
  ['Connector package', `${evidence.identities.connector.package} ${evidence.identities.connector.version}`],
  ['Connector git revision', `${evidence.identities.connector.git_revision}${evidence.identities.connector.git_dirty ? ' (with uncommitted changes)' : ''}`],
  ['Host', `Node.js ${evidence.identities.host.node_version} on ${evidence.identities.host.platform}/${evidence.identities.host.arch}`],
  ['Step timeout', duration(evidence.settings.step_timeout_ms)],
  ['Approval prompt', promptText(evidence.settings.approval_prompt)],
  ['Harmless prompt', promptText(evidence.settings.harmless_prompt)],
  ['Provider approval choice', evidence.settings.approval_choice],
  ['Run ledger', `${evidence.settings.ledger.kind} (${evidence.settings.ledger.location})`],
  ['Started', evidence.started_at],
  ['Finished', evidence.finished_at],
])}
</section>
${evidence.endpoints.map(endpointSection).join('\n')}`,
  );
}

/** The page around a report's body: inline CSS, no script, no external resource (the CSP forbids them). */
export function htmlPage(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

function checkRow(endpoint: EndpointRecord, check: CheckRecord): string {
  const label = check.result === 'passed' ? 'PASS' : 'FAIL';
  return `<tr data-endpoint="${escapeHtml(endpoint.endpoint_id)}" data-check="${escapeHtml(check.id)}" data-result="${escapeHtml(check.result)}">
<td><code>${escapeHtml(endpoint.endpoint_id)}</code></td><td class="num">${check.number}</td>
<td><code>${escapeHtml(check.id)}</code><br><span class="check-title">${escapeHtml(check.title)}</span></td>
<td class="result ${escapeHtml(check.result)}">${label}</td><td class="duration">${escapeHtml(duration(check.duration_ms))}</td>
<td>${check.reason === null ? '' : escapeHtml(check.reason)}</td></tr>`;
}

function endpointSection(endpoint: EndpointRecord): string {
  return `<section class="endpoint" data-endpoint="${escapeHtml(endpoint.endpoint_id)}">
<h2>Endpoint <code>${escapeHtml(endpoint.endpoint_id)}</code>: <span class="verdict ${escapeHtml(endpoint.result)}">${escapeHtml(endpoint.result.toUpperCase())}</span></h2>
${identityTable('identities', [
  ['Endpoint id', endpoint.endpoint_id],
  ['Display name', endpoint.display_name ?? '(none)'],
  ['Base URL', endpoint.base_url],
  ['Hermes version', hermesText(endpoint)],
  ['Hermes declares', offerText(endpoint)],
  ['Tenant binding', endpoint.tenant_binding ?? '(not bound to a tenant)'],
  ['Credential revision', `${endpoint.credential_revision} (first 12 hex digits of SHA-256 of the key)`],
  ['Credential source', endpoint.credential_source],
  ['Started', endpoint.started_at],
  ['Finished', endpoint.finished_at],
])}
<h3>Evidence per check</h3>
${endpoint.checks
  .map(
    (check) => `<details><summary><code>${escapeHtml(check.id)}</code>: ${check.result === 'passed' ? 'PASS' : 'FAIL'}</summary>
<pre>${escapeHtml(JSON.stringify(check.evidence, null, 2))}</pre></details>`,
  )
  .join('\n')}
<h3>Cleanup</h3>
${
  endpoint.cleanup.length === 0
    ? '<p>No run needed cleaning up.</p>'
    : `<table><thead><tr><th>Run</th><th>Started by</th><th>Actions</th></tr></thead><tbody>
${endpoint.cleanup.map((entry) => `<tr><td><code>${escapeHtml(entry.run_id)}</code></td><td>${escapeHtml(entry.started_by)}</td><td>${entry.actions.map(escapeHtml).join('<br>')}</td></tr>`).join('\n')}
</tbody></table>`
}
</section>`;
}

/** "live Hermes 0.19.0" or "embedded Hermes simulator, profile pin (0.18.2+aip-simulator)". */
function targetText(evidence: QualificationEvidence): string {
  const versions = [...new Set(evidence.endpoints.map((endpoint) => endpoint.hermes.version ?? 'version unknown'))].join(', ');
  if (evidence.target.kind === 'live') return `live Hermes ${versions}`;
  return `embedded Hermes simulator, profile ${evidence.target.simulator_profile ?? 'pin'} (${versions})`;
}

function offerText({ offer }: EndpointRecord): string {
  if (offer.source !== 'capabilities')
    return `nothing beyond the pinned runs API (GET /v1/capabilities ${offer.source === 'not_served' ? 'not served' : 'unreadable'})`;
  const durable = offer.durable_run_idempotency;
  const declared = [
    durable === null ? undefined : `durable run idempotency${durable.retention_seconds === null ? '' : ` (${durable.retention_seconds} s)`}`,
    offer.run_steer ? 'run steer' : undefined,
  ].filter((feature) => feature !== undefined);
  return `${declared.length === 0 ? 'no run features beyond the pin' : declared.join(', ')}, from GET /v1/capabilities`;
}

function hermesText(endpoint: EndpointRecord): string {
  const { version, platform, read_from: readFrom, problem } = endpoint.hermes;
  if (version === null) return `unknown: ${problem ?? readFrom}`;
  return `${version}${platform === null ? '' : ` (${platform})`}, from ${readFrom}${problem === null ? '' : ` (${problem})`}`;
}

export function identityTable(className: string, rows: Array<[string, string]>): string {
  return `<table class="${className}"><tbody>
${rows.map(([name, value]) => `<tr><th>${escapeHtml(name)}</th><td>${escapeHtml(value)}</td></tr>`).join('\n')}
</tbody></table>`;
}

function promptText(prompt: QualificationEvidence['settings']['approval_prompt']): string {
  return `${prompt.default ? 'default' : 'custom'}, ${prompt.length} characters, SHA-256 ${prompt.sha256.slice(0, 16)}…`;
}
