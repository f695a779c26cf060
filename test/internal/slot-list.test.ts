import { describe, expect, it } from 'vitest';
import { SlotList } from '../../src/internal/slot-list.js';

const item = (name: string) => ({ name, slot: -1 });

describe('SlotList', () => {
  it('removal swaps the last item into the hole and keeps every slot true', () => {
    const list = new SlotList<ReturnType<typeof item>>();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(item) as [ReturnType<typeof item>, ReturnType<typeof item>, ReturnType<typeof item>, ReturnType<typeof item>];
    for (const entry of [a, b, c, d]) list.add(entry);
    list.remove(b);
    expect(list.items.map((entry) => entry.name)).toEqual(['a', 'd', 'c']);
    expect(list.items.every((entry, index) => entry.slot === index)).toBe(true);
    expect(b.slot).toBe(-1);
    list.remove(c);
    list.remove(a);
    expect(list.items).toEqual([{ name: 'd', slot: 0 }]);
  });

  it('adding twice and removing what is not there change nothing', () => {
    const list = new SlotList<ReturnType<typeof item>>();
    const a = item('a');
    const stranger = item('x');
    list.add(a);
    list.add(a);
    list.remove(stranger);
    list.remove(a);
    list.remove(a);
    expect(list.items).toEqual([]);
    expect(a.slot).toBe(-1);
  });

  it('an item claiming a slot another item holds is not removed in its place', () => {
    const list = new SlotList<ReturnType<typeof item>>();
    const a = item('a');
    list.add(a);
    const impostor = { name: 'impostor', slot: 0 };
    list.remove(impostor);
    expect(list.items).toEqual([a]);
  });
});
