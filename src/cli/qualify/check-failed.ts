/** A check's verdict: the reason is one sentence an operator can act on. */
export class CheckFailed extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'CheckFailed';
  }
}
