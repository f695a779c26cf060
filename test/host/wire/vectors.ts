/** The reference's signed vectors (copied from shared/reference/aip-vectors/samples.jsonl into fixtures/, so the suite runs without shared/), each with its document's raw text. */
import { readFileSync } from 'node:fs';

export interface Vector {
  name: string;
  signer_seed_hex: string;
  signer_did: string;
  signing_bytes: string;
  signature: string;
  document: Record<string, unknown>;
  /** The document exactly as it appears in the file. */
  documentText: string;
}

const VECTORS_FILE = new URL('../../../fixtures/aip-vectors/samples.jsonl', import.meta.url);

export function loadVectors(): Vector[] {
  return readFileSync(VECTORS_FILE, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const marker = '"document":';
      // `document` is each line's last member: its raw text runs to the line's closing brace.
      const documentText = line.slice(line.indexOf(marker) + marker.length, -1);
      return { ...(JSON.parse(line) as Omit<Vector, 'documentText'>), documentText };
    });
}
