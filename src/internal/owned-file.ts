/**
 * Files that hold secrets or trusted settings, read safely: a bounded regular file (not a symbolic
 * link) read through the descriptor that was checked. Shared by the host's `_FILE` settings, the
 * admission signers and the connector's webhook secrets, each of which wraps a problem in its own error.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from 'node:fs';

/** 'file not found', 'permission denied', ... instead of an errno dump, whose message would quote the path. */
export function fileErrorText(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === 'ENOENT') return 'file not found';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'EISDIR') return 'is a directory';
  return typeof code === 'string' ? code : 'unreadable';
}

/**
 * The file's text. `secret` files must be owner-only (no group/other bits), `public` ones not
 * group/world writable. Every problem becomes `fail(problem)`, the problem never quoting the content.
 */
export function readOwnedFile(path: string, maxBytes: number, kind: 'secret' | 'public', fail: (problem: string) => Error): string {
  let linked: ReturnType<typeof lstatSync>;
  try {
    linked = lstatSync(path);
  } catch (error) {
    throw fail(`cannot read the file: ${fileErrorText(error)}`);
  }
  if (linked.isSymbolicLink() || !linked.isFile()) throw fail('must name a regular file, not a symbolic link');
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    throw fail(`cannot open the file: ${fileErrorText(error)}`);
  }
  try {
    const opened = fstatSync(fd);
    if (opened.dev !== linked.dev || opened.ino !== linked.ino || !opened.isFile()) throw fail('the file changed while it was opened');
    if (opened.size === 0 || opened.size > maxBytes) throw fail(`the file must hold 1 to ${maxBytes} bytes`);
    const forbidden = kind === 'secret' ? 0o077 : 0o022;
    if ((opened.mode & forbidden) !== 0) {
      throw fail(kind === 'secret' ? 'the file must be owner-only (chmod 600)' : 'the file must not be group or world writable');
    }
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    let read = 1;
    while (read > 0 && length <= maxBytes) {
      read = readSync(fd, buffer, length, buffer.length - length, null);
      length += read;
    }
    if (length === 0 || length > maxBytes) throw fail('the file changed size while it was read');
    const text = buffer.toString('utf8', 0, length);
    buffer.fill(0);
    return text;
  } finally {
    closeSync(fd);
  }
}
