import { describe, expect, it } from 'vitest';
import { DefaultAuthorizationPlugin } from '../../src/auth/authorization-plugin.js';
import { subjectFromClaims } from '../../src/auth/authenticator.js';
import { UNAUTHENTICATED, type Subject } from '../../src/auth/subject.js';
import { eventOwner } from '../../src/domain/event-type/event-owner.js';

const plugin = new DefaultAuthorizationPlugin(['user', 'service', 'team']);
const alice: Subject = { id: 'alice', attributes: new Map([['user', ['alice']], ['team', ['payments', 'search']]]) };

describe('DefaultAuthorizationPlugin', () => {
  it.each([
    [{ data_type: 'user', value: 'alice' }, true],
    [{ data_type: 'user', value: 'bob' }, false],
    [{ data_type: 'team', value: 'search' }, true],
    [{ data_type: 'team', value: '*' }, true],
    [{ data_type: 'service', value: '*' }, false],
    [{ data_type: '*', value: '*' }, true],
    [{ data_type: '*', value: 'alice' }, false],
    [{ data_type: 'robot', value: 'alice' }, false],
  ])('matches %j: %s', (attribute, expected) => {
    expect(plugin.matches(alice, attribute)).toBe(expected);
  });

  it('gives the development subject only its own user attribute and the wildcard', () => {
    expect(plugin.matches(UNAUTHENTICATED, { data_type: 'user', value: 'unauthenticated' })).toBe(true);
    expect(plugin.matches(UNAUTHENTICATED, { data_type: '*', value: '*' })).toBe(true);
    expect(plugin.matches(UNAUTHENTICATED, { data_type: 'team', value: '*' })).toBe(false);
  });

  it('refuses unknown data types and a wildcard data type with a concrete value', () => {
    expect(plugin.validate({ data_type: 'user', value: 'x' })).toBeUndefined();
    expect(plugin.validate({ data_type: '*', value: '*' })).toBeUndefined();
    expect(plugin.validate({ data_type: 'robot', value: 'x' })).toMatch(/unknown authorization data type "robot"; known: user, service, team, \*/);
    expect(plugin.validate({ data_type: '*', value: 'x' })).toMatch(/only goes with the value/);
    // Inherited object keys are not data types.
    expect(plugin.validate({ data_type: 'constructor', value: 'x' })).toMatch(/unknown/);
  });
});

describe('subjectFromClaims', () => {
  const config = { subjectClaim: 'sub', attributeClaims: { user: 'sub', service: 'client_id', team: 'teams' } };

  it('maps the subject claim and string or array claims to attributes, ignoring other claim types', () => {
    const subject = subjectFromClaims({ sub: 'alice', teams: ['payments', 7, 'search'], client_id: { nested: true } }, config);
    expect(subject?.id).toBe('alice');
    expect(Object.fromEntries(subject?.attributes ?? [])).toEqual({ user: ['alice'], team: ['payments', 'search'] });
  });

  it('has no subject without a non-empty string subject claim, nor from inherited keys', () => {
    expect(subjectFromClaims({ teams: ['x'] }, config)).toBeUndefined();
    expect(subjectFromClaims({ sub: '' }, config)).toBeUndefined();
    expect(subjectFromClaims({ sub: 42 }, config)).toBeUndefined();
    expect(subjectFromClaims({}, { ...config, subjectClaim: 'constructor' })).toBeUndefined();
  });
});

describe('eventOwner', () => {
  const path = { type: 'path' as const, name: 'team', value: 'data.owner' };

  it.each([
    [{ data: { owner: 'payments' } }, 'payments'],
    [{ data: { owner: 12 } }, '12'],
    [{ data: { owner: true } }, 'true'],
    [{ data: { owner: null } }, undefined],
    [{ data: { owner: { team: 'x' } } }, undefined],
    [{ data: {} }, undefined],
    [{ data: 'owner' }, undefined],
    [{}, undefined],
  ])('path data.owner of %j is %s', (event, expected) => {
    expect(eventOwner(path, event)).toBe(expected);
  });

  it('never follows inherited properties, and a static selector gives its value', () => {
    expect(eventOwner({ type: 'path', name: 'team', value: 'constructor.name' }, {})).toBeUndefined();
    expect(eventOwner({ type: 'path', name: 'team', value: '__proto__' }, JSON.parse('{"__proto__":"x"}'))).toBe('x');
    expect(eventOwner({ type: 'static', name: 'team', value: 'payments' }, {})).toBe('payments');
  });
});
