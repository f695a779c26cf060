import { escapeHtml, htmlPage, identityTable } from '../cli/report-html.js';
import { duration } from '../cli/format.js';
import type { ConformanceArtifact, EndpointConformance } from './artifact.js';
import type { BehaviourCheck, StaticCheck } from './kit/types.js';

const LABEL: Record<BehaviourCheck['verdict'], string> = { passed: 'PASS', failed: 'FAIL', not_applicable: 'N/A' };

/** conformance.html: the qualification report's page and escaping, with the thirteen checks and their assertions. */
export function renderConformanceReport(artifact: ConformanceArtifact): string {
  const { summary, identities } = artifact;
  const verdict = artifact.result.toUpperCase();
  return htmlPage(
    `Hermes AIP conformance: ${verdict}`,
    `<header>
<h1>Hermes Agent AIP connector conformance</h1>
<p><span id="verdict" class="verdict ${escapeHtml(artifact.result)}">${escapeHtml(verdict)}</span>
${summary.passed} passed, ${summary.failed} failed, ${summary.not_applicable} not applicable of ${summary.checks} behaviour checks on ${summary.endpoints} endpoint${summary.endpoints === 1 ? '' : 's'}, ${escapeHtml(duration(artifact.duration_ms))}.</p>
<p class="note">${escapeHtml(artifact.target.note)}</p>
</header>
<section>
<h2>Identities</h2>
${identityTable('identities', [
  ['Conformance id', artifact.conformance_id],
  [
    'Target',
    `${artifact.target.kind}${artifact.target.simulator_profile ? ` (simulator profile ${artifact.target.simulator_profile})` : ''}; ${artifact.target.config_source}`,
  ],
  ['Evidence source', artifact.target.evidence_source],
  ['AIP protocol version', identities.aip_protocol_version],
  ['Contracts digest', identities.contracts_digest],
  ['Pinned Hermes revision', identities.hermes_pinned_revision],
  ['Connector package', `${identities.connector.package} ${identities.connector.version}`],
  ['Connector git revision', `${identities.connector.git_revision}${identities.connector.git_dirty ? ' (with uncommitted changes)' : ''}`],
  ['Host', `Node.js ${identities.host.node_version} on ${identities.host.platform}/${identities.host.arch}`],
  ['Started', artifact.started_at],
  ['Finished', artifact.finished_at],
])}
</section>
${artifact.endpoints.map((endpoint) => endpointSection(endpoint, artifact.static_checks_reading)).join('\n')}`,
  );
}

function endpointSection(endpoint: EndpointConformance, reading: string): string {
  return `<section class="endpoint" data-endpoint="${escapeHtml(endpoint.endpoint_id)}">
<h2>Endpoint <code>${escapeHtml(endpoint.endpoint_id)}</code>: <span class="verdict ${escapeHtml(endpoint.result)}">${escapeHtml(endpoint.result.toUpperCase())}</span></h2>
${identityTable('identities', [
  ['Base URL', endpoint.base_url],
  ['Tenant binding', endpoint.tenant_binding ?? '(not bound; the kit binds its own test tenant)'],
  ['Credential revision', `${endpoint.credential_revision} (first 12 hex digits of SHA-256 of the key)`],
  ['Credential source', endpoint.credential_source],
])}
<h3>Behaviour checks</h3>
<table class="checks">
<thead><tr><th>Check</th><th>Result</th><th>Assertions</th><th>Reason</th></tr></thead>
<tbody>
${endpoint.checks.map(checkRow).join('\n')}
</tbody>
</table>
<h3>Static manifest checks</h3>
<p class="note">${escapeHtml(reading)}</p>
<table class="static">
<thead><tr><th>Check</th><th>Result</th><th>Findings</th></tr></thead>
<tbody>
${endpoint.static_checks.map(staticRow).join('\n')}
</tbody>
</table>
<h3>Observations per check</h3>
${endpoint.checks
  .filter((check) => check.verdict !== 'not_applicable')
  .map(
    (check) => `<details><summary><code>${escapeHtml(check.id)}</code>: ${LABEL[check.verdict]}</summary>
<p>Artifacts: ${check.artifacts.map((artifact) => `<code>${escapeHtml(artifact)}</code>`).join(', ')}</p>
${check.host_roles.length > 0 ? `<p>Played by the kit as host: ${check.host_roles.map(escapeHtml).join('; ')}</p>` : ''}
<pre>${escapeHtml(JSON.stringify(check.observations, null, 2))}</pre></details>`,
  )
  .join('\n')}
</section>`;
}

function checkRow(check: BehaviourCheck): string {
  const assertions = check.assertions.map(
    (assertion) =>
      `<li class="${assertion.passed ? 'passed' : 'failed'}" title="${escapeHtml(assertion.reason)}"><code>${escapeHtml(assertion.name)}</code> ${assertion.passed ? 'true' : 'false'}</li>`,
  );
  return `<tr data-check="${escapeHtml(check.id)}" data-result="${escapeHtml(check.verdict)}">
<td><code>${escapeHtml(check.id)}</code></td><td class="result ${escapeHtml(check.verdict)}">${LABEL[check.verdict]}</td>
<td>${assertions.length > 0 ? `<ul>${assertions.join('')}</ul>` : ''}</td><td>${escapeHtml(check.reason)}</td></tr>`;
}

function staticRow(check: StaticCheck): string {
  return `<tr data-check="${escapeHtml(check.id)}" data-result="${check.passed ? 'passed' : 'failed'}">
<td><code>${escapeHtml(check.id)}</code></td><td class="result ${check.passed ? 'passed' : 'failed'}">${check.passed ? 'PASS' : 'FAIL'}</td>
<td>${check.findings.length === 0 ? '' : `<ul>${check.findings.map((finding) => `<li>${escapeHtml(finding)}</li>`).join('')}</ul>`}</td></tr>`;
}
