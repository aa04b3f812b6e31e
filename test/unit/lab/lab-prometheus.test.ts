// The lab cluster's Prometheus configuration (lab/cluster/prometheus.ts): one job scraping every
// node's operator, each target labelled with its node. The scrape itself is a cluster scenario.
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { PROMETHEUS_JOB, prometheusConfig } from '../../../lab/cluster/prometheus.js';

describe('prometheusConfig', () => {
  it('scrapes each node\'s operator at the interval, labelled with the node, the timeout inside the interval', () => {
    const c = parse(prometheusConfig([{ node: 'a', address: '172.18.0.2:10262' }, { node: 'b', address: '172.18.0.3:10262' }], 2)) as {
      global: Record<string, string>; scrape_configs: Array<{ job_name: string; scrape_timeout: string; static_configs: Array<{ targets: string[]; labels: Record<string, string> }> }>;
    };
    expect(c.global).toEqual({ scrape_interval: '2s', evaluation_interval: '2s' });
    expect(c.scrape_configs).toEqual([{ job_name: PROMETHEUS_JOB, scrape_timeout: '1s', static_configs: [
      { targets: ['172.18.0.2:10262'], labels: { node: 'a' } }, { targets: ['172.18.0.3:10262'], labels: { node: 'b' } },
    ] }]);
  });
});
