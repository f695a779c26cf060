import { Writable } from 'node:stream';
import { pino } from 'pino';

/** A pino logger at trace level whose lines are kept: parsed (`lines`) and as written (`raw()`). */
export function captureLogger() {
  const lines: Array<Record<string, unknown>> = [];
  let raw = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      raw += chunk.toString('utf8');
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'trace' }, sink), lines, raw: () => raw };
}
