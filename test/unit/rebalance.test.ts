import { describe, expect, it } from 'vitest';
import { completeReassignment, freeSlots, rebalance, validateDirectRequests, type PartitionAssignment, type PartitionKey, type Session } from '../../src/domain/subscription/rebalance.js';

const ET = 'orders';
const keys = (n: number, eventType = ET): PartitionKey[] => Array.from({ length: n }, (_, i) => ({ eventType, partition: String(i) }));
const auto = (id: string): Session => ({ id, requested: [] });
const direct = (id: string, ...partitions: string[]): Session => ({ id, requested: partitions.map((partition) => ({ eventType: ET, partition })) });

/**
 * Compact notation, one string per partition of `ET` in partition order:
 * `A` assigned to A, `A>B` reassigning from A to B, `A>-` reassigning from A to nobody, `-` unassigned;
 * a trailing `*` marks a direct assignment.
 */
function assignments(notation: readonly string[], eventType = ET): PartitionAssignment[] {
  return notation.map((n, i) => {
    const assignmentType = n.endsWith('*') ? 'direct' : 'auto';
    const owner = n.replace('*', '');
    const base = { eventType, partition: String(i), assignmentType } as const;
    if (owner === '-') return { ...base, state: 'unassigned', session: '', nextSession: '' };
    const [from = '', to = ''] = owner.split('>');
    if (to === '') return { ...base, state: 'assigned', session: from, nextSession: '' };
    return { ...base, state: 'reassigning', session: from, nextSession: to === '-' ? '' : to };
  });
}

function notate(result: readonly PartitionAssignment[]): string[] {
  return result.map((a) => {
    const owner = a.state === 'unassigned' ? '-' : a.state === 'reassigning' ? `${a.session}>${a.nextSession || '-'}` : a.session;
    return owner + (a.assignmentType === 'direct' ? '*' : '');
  });
}

const countBy = (result: readonly PartitionAssignment[]): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const a of result) counts[a.session] = (counts[a.session] ?? 0) + 1;
  return counts;
};

describe('rebalance', () => {
  it.each<{ name: string; sessions: Session[]; current: string[]; expected: string[] }>([
    { name: 'no sessions: every partition unassigned', sessions: [], current: ['A', 'B>C', '-'], expected: ['-', '-', '-'] },
    { name: 'first session takes everything', sessions: [auto('A')], current: ['-', '-', '-'], expected: ['A', 'A', 'A'] },
    { name: '8 partitions, 3 sessions from scratch: 3/3/2 by session id', sessions: [auto('c'), auto('a'), auto('b')], current: Array<string>(8).fill('-'), expected: ['a', 'a', 'a', 'b', 'b', 'b', 'c', 'c'] },
    { name: 'second session joins: exactly half moves, reassigning', sessions: [auto('A'), auto('B')], current: Array<string>(8).fill('A'), expected: ['A', 'A', 'A', 'A', 'A>B', 'A>B', 'A>B', 'A>B'] },
    { name: 'session leaves: its partitions assigned to the other at once', sessions: [auto('A')], current: ['A', 'A', 'A', 'A', 'B', 'B', 'B', 'B'], expected: Array<string>(8).fill('A') },
    { name: 'session leaves among three: 3/3/2 → 4/4', sessions: [auto('a'), auto('c')], current: ['a', 'a', 'a', 'b', 'b', 'b', 'c', 'c'], expected: ['a', 'a', 'a', 'a', 'c', 'c', 'c', 'c'] },
    { name: 'third session joins 4/4: takes one from each', sessions: [auto('a'), auto('b'), auto('c')], current: ['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b'], expected: ['a', 'a', 'a', 'a>c', 'b', 'b', 'b', 'b>c'] },
    { name: 'larger share goes to the session that already owns more', sessions: [auto('a'), auto('b'), auto('c')], current: ['a', 'a', 'b', 'b', 'b', 'c', 'c', 'c'], expected: ['a', 'a', 'b', 'b', 'b', 'c', 'c', 'c'] },
    { name: 'more sessions than partitions: the extra session gets nothing', sessions: [auto('a'), auto('b'), auto('c')], current: ['-', '-'], expected: ['a', 'b'] },
    { name: 'direct + auto mix', sessions: [direct('D', '0', '5'), auto('A'), auto('B')], current: Array<string>(6).fill('-'), expected: ['D*', 'A', 'A', 'B', 'B', 'D*'] },
    { name: 'direct request takes a partition from a live auto owner', sessions: [auto('A'), direct('D', '1')], current: ['A', 'A', 'A'], expected: ['A', 'A>D*', 'A'] },
    { name: 'direct requester gone: partition returns to the auto pool', sessions: [auto('A')], current: ['A', 'D*', 'A'], expected: ['A', 'A', 'A'] },
    { name: 'only direct sessions: the rest stays unassigned', sessions: [direct('D', '0')], current: ['-', 'X', '-'], expected: ['D*', '-', '-'] },
    { name: 'ongoing reassignment is kept as it is', sessions: [auto('A'), auto('B')], current: ['A', 'A', 'A>B', 'A>B'], expected: ['A', 'A', 'A>B', 'A>B'] },
    { name: 'old owner of a reassignment gone: assigned to the new owner', sessions: [auto('B')], current: ['A>B', 'A>B', 'B', 'B'], expected: ['B', 'B', 'B', 'B'] },
    { name: 'target of a reassignment gone: back to its live holder', sessions: [auto('A')], current: ['A', 'A', 'A>B', 'A>B'], expected: ['A', 'A', 'A', 'A'] },
    { name: 'reassignment redirected to another live session', sessions: [auto('A'), auto('C')], current: ['A', 'A', 'A>B', 'A>B'], expected: ['A', 'A', 'A>C', 'A>C'] },
  ])('$name', ({ sessions, current, expected }) => {
    const result = rebalance(keys(expected.length), sessions, assignments(current));
    expect(notate(result)).toEqual(expected);
  });

  it.each<{ name: string; sessions: Session[]; holders: string[]; current: string[]; expected: string[] }>([
    { name: 'closed holder inside its commit window, no other session: reassigning to nobody', sessions: [], holders: ['A'], current: ['A', 'A', '-'], expected: ['A>-', 'A>-', '-'] },
    { name: 'closed holder inside its commit window, another session: reassigning to it', sessions: [auto('B')], holders: ['A', 'B'], current: ['A', 'A'], expected: ['A>B', 'A>B'] },
    { name: 'closed holder expired: assigned at once', sessions: [auto('B')], holders: ['B'], current: ['A', 'A>-'], expected: ['B', 'B'] },
    { name: 'closed holder never gets new partitions', sessions: [auto('B')], holders: ['A', 'B'], current: ['-', '-'], expected: ['B', 'B'] },
  ])('holders: $name', ({ sessions, holders, current, expected }) => {
    const result = rebalance(keys(expected.length), sessions, assignments(current), new Set(holders));
    expect(notate(result)).toEqual(expected);
  });

  it('8 partitions and 3 sessions: counts 3/3/2', () => {
    expect(countBy(rebalance(keys(8), [auto('s1'), auto('s2'), auto('s3')], []))).toEqual({ s1: 3, s2: 3, s3: 2 });
  });

  it.each<{ name: string; sessions: Session[]; current: string[] }>([
    { name: 'one session', sessions: [auto('A')], current: ['A', 'A', 'A'] },
    { name: '3/3/2 in id order', sessions: [auto('a'), auto('b'), auto('c')], current: ['a', 'a', 'a', 'b', 'b', 'b', 'c', 'c'] },
    { name: '2/3/3 not in id order', sessions: [auto('a'), auto('b'), auto('c')], current: ['a', 'a', 'b', 'b', 'b', 'c', 'c', 'c'] },
    { name: 'interleaved owners', sessions: [auto('a'), auto('b')], current: ['b', 'a', 'b', 'a'] },
    { name: 'direct and auto', sessions: [direct('D', '0', '5'), auto('A'), auto('B')], current: ['D*', 'B', 'A', 'B', 'A', 'D*'] },
    { name: 'no sessions', sessions: [], current: ['-', '-'] },
  ])('stability: a balanced assignment is left unchanged ($name)', ({ sessions, current }) => {
    const before = assignments(current);
    const once = rebalance(keys(current.length), sessions, before);
    expect(once).toEqual(before);
    expect(rebalance(keys(current.length), sessions, once)).toEqual(once);
  });

  it('determinism: input order does not matter and repeated calls agree', () => {
    const partitions = [...keys(5, 'b-type'), ...keys(4, 'a-type')];
    const sessions = [auto('s2'), direct('d1'), auto('s1'), auto('s3')];
    const withDirect: Session[] = sessions.map((s) => (s.id === 'd1' ? { id: 'd1', requested: [{ eventType: 'b-type', partition: '3' }] } : s));
    const current = [...assignments(['s1', 's1', 's9', '-'], 'a-type'), ...assignments(['s2', 's2', 's2', 's2', '-'], 'b-type')];
    const expected = rebalance(partitions, withDirect, current);
    expect(rebalance([...partitions].reverse(), [...withDirect].reverse(), [...current].reverse())).toEqual(expected);
    expect(rebalance(partitions, withDirect, current)).toEqual(expected);
    expect(expected.map((a) => `${a.eventType}/${a.partition}`)).toEqual(['a-type/0', 'a-type/1', 'a-type/2', 'a-type/3', 'b-type/0', 'b-type/1', 'b-type/2', 'b-type/3', 'b-type/4']);
    const counts = countBy(expected.filter((a) => a.assignmentType === 'auto'));
    expect(Object.values(counts).sort()).toEqual([2, 3, 3]);
    expect(expected.find((a) => a.eventType === 'b-type' && a.partition === '3')).toMatchObject({ state: 'reassigning', session: 's2', nextSession: 'd1', assignmentType: 'direct' });
  });

  it('counts of automatic sessions differ by at most one', () => {
    for (let n = 0; n <= 12; n += 1) {
      for (let s = 1; s <= 5; s += 1) {
        const sessions = Array.from({ length: s }, (_, i) => auto(`s${i}`));
        const counts = sessions.map((x) => rebalance(keys(n), sessions, []).filter((a) => a.session === x.id).length);
        expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
        expect(counts.reduce((a, b) => a + b, 0)).toBe(n);
      }
    }
  });
});

describe('completeReassignment', () => {
  it.each<{ name: string; current: string[]; key: string; expected: string[] }>([
    { name: 'moves a reassigning partition to its next session', current: ['A', 'A>B', 'A>B*'], key: '1', expected: ['A', 'B', 'A>B*'] },
    { name: 'keeps the assignment type', current: ['A', 'A>B', 'A>B*'], key: '2', expected: ['A', 'A>B', 'B*'] },
    { name: 'leaves an assigned partition alone', current: ['A', 'A>B'], key: '0', expected: ['A', 'A>B'] },
    { name: 'ignores an unknown partition', current: ['A', 'A>B'], key: '7', expected: ['A', 'A>B'] },
    { name: 'reassigning to nobody becomes unassigned', current: ['A>-', 'A'], key: '0', expected: ['-', 'A'] },
  ])('$name', ({ current, key, expected }) => {
    expect(notate(completeReassignment(assignments(current), { eventType: ET, partition: key }))).toEqual(expected);
  });
});

describe('validateDirectRequests', () => {
  it.each<{ name: string; sessions: Session[]; request: Session; expected: ReturnType<typeof validateDirectRequests> | { ok: false; status: 409 | 422 } }>([
    { name: 'automatic session', sessions: [direct('D', '0')], request: auto('N'), expected: { ok: true } },
    { name: 'free partitions', sessions: [direct('D', '0'), auto('A')], request: direct('N', '1', '2'), expected: { ok: true } },
    { name: 'partition not in the subscription', sessions: [], request: direct('N', '9'), expected: { ok: false, status: 422 } },
    { name: 'other event type', sessions: [], request: { id: 'N', requested: [{ eventType: 'other', partition: '0' }] }, expected: { ok: false, status: 422 } },
    { name: 'same partition twice', sessions: [], request: direct('N', '1', '1'), expected: { ok: false, status: 422 } },
    { name: 'taken by another live session', sessions: [direct('D', '0', '2')], request: direct('N', '1', '2'), expected: { ok: false, status: 409 } },
    { name: '422 before 409', sessions: [direct('D', '0')], request: direct('N', '0', '9'), expected: { ok: false, status: 422 } },
    { name: 'own earlier registration is no conflict', sessions: [direct('N', '0')], request: direct('N', '0'), expected: { ok: true } },
  ])('$name', ({ sessions, request, expected }) => {
    expect(validateDirectRequests(keys(4), sessions, request)).toMatchObject(expected);
  });

  it('names the partition in the detail', () => {
    const result = validateDirectRequests(keys(2), [], direct('N', '5'));
    expect(result.ok ? '' : result.detail).toContain('"5"');
  });
});

describe('freeSlots', () => {
  it.each([
    [4, 0, 4],
    [4, 3, 1],
    [4, 4, 0],
    [2, 3, -1],
    [0, 0, 0],
  ])('%i partitions, %i sessions → %i', (partitions, sessions, expected) => {
    expect(freeSlots(keys(partitions), Array.from({ length: sessions }, (_, i) => auto(`s${i}`)))).toBe(expected);
  });
});
