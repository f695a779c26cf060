/**
 * A detached Ed25519 signature over an image digest. The image `npm run image` builds is unsigned, and neither cosign
 * nor notation is reachable here, so an `oci_signature` statement could otherwise verify nothing. This is our own
 * format, checked only by `hermes-aip admission`: a registry or container engine policy does not read it.
 */
import { canonicalJson } from '../../host/wire/json.js';
import { type SigningKey, verifyWithDid } from '../../host/wire/keys.js';

export const IMAGE_SIGNATURE_SCHEMA = 'hermes-aip.image-signature/v1';

export interface ImageSignature {
  schema_version: typeof IMAGE_SIGNATURE_SCHEMA;
  artifact_digest: string;
  signer_did: string;
  signature: string;
}

const signedPart = (artifactDigest: string): string => canonicalJson({ schema_version: IMAGE_SIGNATURE_SCHEMA, artifact_digest: artifactDigest });

export function signImage(artifactDigest: string, key: SigningKey): ImageSignature {
  return { schema_version: IMAGE_SIGNATURE_SCHEMA, artifact_digest: artifactDigest, signer_did: key.did, signature: key.sign(signedPart(artifactDigest)) };
}

/** Why `document` is not a signature by `signerDid` over `artifactDigest`, or undefined when it is. */
export function imageSignatureProblem(document: unknown, artifactDigest: string, signerDid: string): string | undefined {
  const signature = document as Partial<ImageSignature> | null;
  if (signature === null || typeof signature !== 'object' || signature.schema_version !== IMAGE_SIGNATURE_SCHEMA) {
    return `the image signature is not a ${IMAGE_SIGNATURE_SCHEMA} document`;
  }
  if (signature.artifact_digest !== artifactDigest) return 'the image signature is over another image digest';
  if (signature.signer_did !== signerDid) return 'the image signature is by another key than --image-signer';
  if (typeof signature.signature !== 'string' || !verifyWithDid(signerDid, signedPart(artifactDigest), signature.signature)) {
    return 'the image signature does not verify';
  }
  return undefined;
}
