/**
 * The manifest a host serves (`bind_manifest_to_host_principal`, aip-connector-host) and its digest (`digest_json`,
 * aip-connector-registry): sha256 over the canonical JSON of the manifest as the reference `Manifest` type re-serialises it.
 */
import { createHash } from 'node:crypto';
import type { Principal } from './envelope.js';
import { canonicalJson, type Json } from './json.js';
import { reserialize } from './reference-types.js';

export const NATIVE_HTTP_PROFILE = 'aip.native.http.v1';
export const NATIVE_HTTP_COMPATIBILITY = { messages: '/aip/v1/messages', manifest: '/aip/v1/manifest' } as const;

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function typedManifest(manifest: object): { tree: unknown; value: Json } {
  const typed = reserialize.manifest(manifest);
  if (!typed.ok) throw new TypeError(`manifest does not fit the reference Manifest type: ${typed.reason}`);
  return typed;
}

/**
 * The served manifest: `agent` is the host's signing principal without its DID (the reference binds the document to the
 * deployment principal; a DID names one replica's key), `profiles` includes `aip.native.http.v1`, and
 * `compatibility.native_http` carries the `messages` and `manifest` paths static conformance asks for, and `channels` adds
 * the host's own (its provider-event channel when it publishes events; none: the field stays absent). The result is a
 * fixed point of the reference `Manifest` type; a manifest that type refuses throws.
 */
export function bindManifestToHost(manifest: object, host: Principal, channels: readonly object[] = []): Record<string, Json> {
  const source = manifest as Record<string, unknown>;
  const { did: _did, ...agent } = host;
  const profiles = Array.isArray(source['profiles']) ? source['profiles'] : [];
  const compatibility = isRecord(source['compatibility']) ? source['compatibility'] : {};
  const nativeHttp = isRecord(compatibility['native_http']) ? compatibility['native_http'] : {};
  const declared = Array.isArray(source['channels']) ? source['channels'] : [];
  return typedManifest({
    ...source,
    agent,
    channels: [...declared, ...channels],
    profiles: profiles.includes(NATIVE_HTTP_PROFILE) ? profiles : [...profiles, NATIVE_HTTP_PROFILE],
    compatibility: { ...compatibility, native_http: { ...nativeHttp, ...NATIVE_HTTP_COMPATIBILITY } },
  }).value as Record<string, Json>;
}

/** "sha256:" + hex SHA-256 of the canonical JSON of the manifest as the reference re-serialises it. */
export function manifestDigest(manifest: object): string {
  return digestJson(typedManifest(manifest).tree);
}

/** The reference's `digest_json`: "sha256:" + hex SHA-256 of the canonical JSON of a value (a parsed tree keeps its number lexemes). */
export function digestJson(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex')}`;
}
