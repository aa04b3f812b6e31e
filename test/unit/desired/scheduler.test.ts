// The scheduler annotations read once per text: Services written from one template share their
// checked options (one frozen object), each still gets its own problem, and the reads are bounded.
import { describe, expect, it, jest } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import type { PluginContext, PluginEndpoint, SchedulerPlugin } from '../../../plugins/types.js';
import {
  MAX_KEPT_OPTION_TEXTS, SCHEDULER_ANNOTATION, SCHEDULER_OPTIONS_ANNOTATION, type SchedulerChoice, chooseDefault,
  chooseScheduler,
} from '../../../src/desired/scheduler.js';
import type { Problem } from '../../../src/desired/types.js';

const context: PluginContext = { nodeName: 'node-a' };
const wrr = (options: string) => ({ [SCHEDULER_ANNOTATION]: 'wrr', [SCHEDULER_OPTIONS_ANNOTATION]: options });

function choose(registry: PluginRegistry, id: string, annotations: object, fallback?: SchedulerChoice) {
  const problems: Problem[] = [];
  const choice = chooseScheduler(id, annotations, registry, fallback ?? chooseDefault(registry, 'rr', context, []), context, problems);
  return { choice, problems };
}

describe('chooseScheduler: options read once per text', () => {
  it('gives Services with one text the same frozen options, checked once', () => {
    const registry = new PluginRegistry();
    const validate = jest.spyOn(registry, 'validateOptions');
    const text = '{"weights":{"byNode":{"node-b":3},"byPod":[{"prefix":"web-","weight":2}]}}';
    const a = choose(registry, 'ns/a', wrr(text));
    const b = choose(registry, 'ns/b', wrr(text));
    expect(a.problems).toEqual([]);
    expect(b.problems).toEqual([]);
    expect(b.choice.options).toBe(a.choice.options);
    // The schema's default filled in, as before the reads were kept.
    expect(a.choice.options).toEqual({ weights: { default: 1, byNode: { 'node-b': 3 }, byPod: [{ prefix: 'web-', weight: 2 }] } });
    const o = a.choice.options as { weights: { byNode: object; byPod: object[] } };
    for (const part of [o, o.weights, o.weights.byNode, o.weights.byPod, o.weights.byPod[0]]) expect(Object.isFrozen(part)).toBe(true);
    expect(validate.mock.calls.filter(([name]) => name === 'wrr')).toHaveLength(1);
    // Another text is read on its own.
    const c = choose(registry, 'ns/c', wrr('{"weights":{"default":2}}'));
    expect(c.choice.options).toEqual({ weights: { default: 2 } });
    expect(validate.mock.calls.filter(([name]) => name === 'wrr')).toHaveLength(2);
  });

  it('reports a refused text for every Service, each with its id and the fallback of its call', () => {
    const registry = new PluginRegistry();
    const text = '{"weight":{"node-b":3}}';
    const a = choose(registry, 'ns/a', wrr(text));
    const lc = chooseDefault(registry, 'lc', context, []);
    const b = choose(registry, 'ns/b', wrr(text), lc);
    const notJson = choose(registry, 'ns/c', wrr('{weights:'));
    const again = choose(registry, 'ns/d', wrr('{weights:'));
    expect(a.choice.plugin.name).toBe('rr');
    expect(b.choice).toBe(lc);
    expect(a.problems).toMatchObject([{ service: 'ns/a', reason: 'InvalidSchedulerOptions' }]);
    expect(b.problems).toMatchObject([{ service: 'ns/b', reason: 'InvalidSchedulerOptions' }]);
    expect(a.problems[0]!.message).toContain('unknown property "weight"');
    expect(a.problems[0]!.message).toMatch(/using the default scheduler "rr"$/);
    expect(b.problems[0]!.message).toMatch(/using the default scheduler "lc"$/);
    expect(notJson.problems[0]!.message).toContain('not JSON');
    expect(again.problems[0]!.message).toBe(notJson.problems[0]!.message);
  });

  it('keeps the reads of each registry apart: one name, two plugins, two answers', () => {
    const plugin = (optionsSchema: object): SchedulerPlugin => ({
      name: 'pick', description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr', optionsSchema,
      resolve: (_o, eps) => ({ scheduler: 'rr', flags: 0, weights: eps.map(() => 1) }),
    });
    const loose = new PluginRegistry();
    const strict = new PluginRegistry();
    loose.register(plugin({ type: 'object' }), 'test');
    strict.register(plugin({ type: 'object', additionalProperties: false }), 'test');
    const annotations = { [SCHEDULER_ANNOTATION]: 'pick', [SCHEDULER_OPTIONS_ANNOTATION]: '{"x":1}' };
    expect(choose(loose, 'ns/a', annotations).problems).toEqual([]);
    expect(choose(strict, 'ns/a', annotations).problems).toMatchObject([{ reason: 'InvalidSchedulerOptions' }]);
    expect(choose(loose, 'ns/b', annotations).choice.options).toEqual({ x: 1 });
  });

  it('reads a text again after more than MAX_KEPT_OPTION_TEXTS others, with the same answer', () => {
    const registry = new PluginRegistry();
    const validate = jest.spyOn(registry, 'validateOptions');
    const first = choose(registry, 'ns/first', wrr('{"weights":{"default":7}}')).choice.options;
    for (let i = 0; i < MAX_KEPT_OPTION_TEXTS; i++) choose(registry, `ns/s${i}`, wrr(`{"weights":{"local":${i}}}`));
    const ofWrr = () => validate.mock.calls.filter(([name]) => name === 'wrr').length;
    expect(ofWrr()).toBe(MAX_KEPT_OPTION_TEXTS + 1);
    const again = choose(registry, 'ns/again', wrr('{"weights":{"default":7}}')).choice.options;
    expect(ofWrr()).toBe(MAX_KEPT_OPTION_TEXTS + 2);
    expect(again).toEqual(first);
  });

  it('a plugin that tries to change its shared options changes nothing the next Service gets', () => {
    const seen: string[] = [];
    const registry = new PluginRegistry();
    registry.register({
      name: 'grabby', description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr',
      optionsSchema: { type: 'object', properties: { n: { type: 'integer' } } },
      resolve: (o: unknown, eps: readonly PluginEndpoint[]) => {
        seen.push(JSON.stringify(o));
        try { (o as { n: number }).n = 99; } catch { /* frozen: strict mode throws */ }
        return { scheduler: 'rr', flags: 0, weights: eps.map(() => 1) };
      },
    }, 'test');
    const annotations = { [SCHEDULER_ANNOTATION]: 'grabby', [SCHEDULER_OPTIONS_ANNOTATION]: '{"n":1}' };
    const a = choose(registry, 'ns/a', annotations).choice;
    const b = choose(registry, 'ns/b', annotations).choice;
    for (const c of [a, b]) c.plugin.resolve(c.options, [], context);
    expect(seen).toEqual(['{"n":1}', '{"n":1}']);
    expect(b.options).toEqual({ n: 1 });
  });
});
