// What the aggregator last published, as a node keeps it: weights and first choices per view key,
// the reporters and refusals per Service. pure.

/** The published IPVSServiceWeights a node holds (ClusterWeights reads them). */
export class PublishedWeights {
  /** Per view key, backend -> weight. */
  readonly weights = new Map<string, Map<string, number>>();
  /** Per view key, node -> first choice, as published. */
  readonly choices = new Map<string, Map<string, string>>();
  /** Per Service, the nodes that report it, when the aggregator named them. */
  readonly reporters = new Map<string, ReadonlySet<string>>();
  /** Per Service, why its published object was refused. */
  readonly invalid = new Map<string, string>();
  /** Per Service, the view keys it published (forget() drops them without a scan of every Service's). */
  private readonly viewKeys = new Map<string, readonly string[]>();

  /** Weights published for a Service (parsed); replaces its ports' previous weights and first choices. */
  publish(service: string, views: ReadonlyMap<string, ReadonlyMap<string, number>>,
    firstChoices: ReadonlyMap<string, ReadonlyMap<string, string>>, reporters?: readonly string[]): void {
    this.forget(service);
    if (reporters) this.reporters.set(service, new Set(reporters));
    this.viewKeys.set(service, [...views.keys()]);
    for (const [k, w] of views) {
      this.weights.set(k, new Map(w));
      const c = firstChoices.get(k);
      if (c) this.choices.set(k, new Map(c));
    }
  }

  /** A published object that failed its checks: its Service's weights go, its error is kept. */
  refuse(service: string, error: string): void {
    this.forget(service);
    this.invalid.set(service, error);
  }

  /** The Service's weights object is gone. */
  forget(service: string): void {
    for (const k of this.viewKeys.get(service) ?? []) {
      this.weights.delete(k);
      this.choices.delete(k);
    }
    this.viewKeys.delete(service);
    this.reporters.delete(service);
    this.invalid.delete(service);
  }
}
