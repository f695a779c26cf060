/**
 * What the host sends out (control-plane requests, stream-chunk callbacks, provider events) goes
 * through one undici Agent that trusts the system roots plus `AIP_CONNECTOR_HOST_TLS_CA_FILE`'s
 * root when one is set, as the reference bootstrap adds `tls_ca_certificate_pem` to its clients.
 */
import { rootCertificates } from 'node:tls';
import { Agent, type Dispatcher } from 'undici';

/** The host's outbound HTTP client; its owner closes it once nothing is sent any more. */
export function outboundAgent(tlsCaPem: string | undefined): Agent {
  return new Agent(tlsCaPem === undefined ? {} : { connect: { ca: [...rootCertificates, tlsCaPem] } });
}

const ERROR_CODE = /^[A-Z][A-Z0-9_]{1,63}$/;
const MAX_CAUSES = 8;

/**
 * Why an outbound request failed, fit for a log line or a result: the first error code on the
 * error's cause chain (a TLS verdict such as `UNABLE_TO_VERIFY_LEAF_SIGNATURE` or
 * `ERR_TLS_CERT_ALTNAME_INVALID`, `ECONNREFUSED`, undici's `UND_ERR_…`), else the error's name
 * (`TimeoutError`). Never an error message: it may quote what a peer sent.
 */
export function transportReason(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < MAX_CAUSES; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && ERROR_CODE.test(code)) return code;
    current = current.cause;
  }
  return error instanceof Error ? error.name : 'transport failure';
}

/** An answer's body as UTF-8 text; undefined (the body destroyed) once it passes `limit` bytes, as declared or as received. */
export async function boundedText(response: Dispatcher.ResponseData, limit: number): Promise<string | undefined> {
  if (Number(response.headers['content-length'] ?? 0) > limit) {
    response.body.destroy();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      response.body.destroy();
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
