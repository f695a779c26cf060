import { isIP } from 'node:net';

/** An IP address (no brackets) is loopback: 127.0.0.0/8 or ::1. */
export function isLoopbackAddress(host: string): boolean {
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '0:0:0:0:0:0:0:1';
}

/** A URL host, brackets removed, is loopback: localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host.toLowerCase() === 'localhost' || isLoopbackAddress(host);
}
