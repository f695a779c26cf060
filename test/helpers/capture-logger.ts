import { Writable } from 'node:stream';
import { pino } from 'pino';

type Line = Record<string, unknown>;

/**
 * A pino logger at trace level whose lines are kept: parsed (`lines`) and as written (`raw()`);
 * `logged(msg)` resolves with the first line of that message, written already or later.
 */
export function captureLogger() {
  const lines: Line[] = [];
  const waiting: Array<{ msg: string; resolve: (line: Line) => void }> = [];
  let raw = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      raw += chunk.toString('utf8');
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) {
        const line = JSON.parse(text) as Line;
        lines.push(line);
        for (const waiter of waiting.filter(({ msg }) => msg === line.msg)) {
          waiting.splice(waiting.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
      done();
    },
  });
  const logged = (msg: string): Promise<Line> => {
    const line = lines.find((candidate) => candidate.msg === msg);
    return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiting.push({ msg, resolve }));
  };
  return { logger: pino({ level: 'trace' }, sink), lines, raw: () => raw, logged };
}
