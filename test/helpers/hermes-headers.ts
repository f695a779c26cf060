/** The security headers Hermes' middleware sets on JSON answers (and, on the real server, not on streams). */
export const HERMES_SECURITY_HEADERS = [
  'content-security-policy',
  'permissions-policy',
  'strict-transport-security',
  'x-content-type-options',
  'x-frame-options',
  'x-xss-protection',
  'referrer-policy',
] as const;
