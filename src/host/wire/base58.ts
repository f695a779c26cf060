/**
 * Base58btc (the Bitcoin alphabet), the multibase `z` encoding of a did:key. Own code rather than a dependency:
 * no base58 package is installed here, and the 34-byte did:key payload needs only this plain big-number conversion.
 */
const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const DIGIT_OF = new Map([...ALPHABET].map((char, digit) => [char, BigInt(digit)]));

export function encodeBase58btc(bytes: Uint8Array): string {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  let encoded = '';
  while (value > 0n) {
    encoded = ALPHABET[Number(value % 58n)] + encoded;
    value /= 58n;
  }
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  return '1'.repeat(zeros) + encoded;
}

/** The bytes of a base58btc string, or undefined when it has a character outside the alphabet. */
export function decodeBase58btc(text: string): Uint8Array | undefined {
  let value = 0n;
  for (const char of text) {
    const digit = DIGIT_OF.get(char);
    if (digit === undefined) return undefined;
    value = value * 58n + digit;
  }
  const body: number[] = [];
  while (value > 0n) {
    body.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  let zeros = 0;
  while (text[zeros] === '1') zeros++;
  return Uint8Array.from([...new Array<number>(zeros).fill(0), ...body]);
}
