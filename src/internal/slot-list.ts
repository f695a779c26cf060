/** An item that remembers its place in a SlotList (-1 while in none). */
export interface Slotted {
  slot: number;
}

/**
 * An unordered list whose items know their index, so removal is a swap with the last item:
 * calls come and go by the thousand, and a Set would rehash every few of them.
 */
export class SlotList<T extends Slotted> {
  readonly items: T[] = [];

  add(item: T): void {
    if (item.slot !== -1) return;
    item.slot = this.items.length;
    this.items.push(item);
  }

  remove(item: T): void {
    const at = item.slot;
    if (at === -1 || this.items[at] !== item) return;
    const last = this.items.pop() as T;
    if (last !== item) {
      this.items[at] = last;
      last.slot = at;
    }
    item.slot = -1;
  }
}
