import { AggregationTemporality, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';

/** A metric reader the test pulls from (`collect()`), with cumulative points. */
export class PullReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}

  /** The points of one metric, as collected now. */
  async points(name: string): Promise<DataPoint<unknown>[]> {
    const { resourceMetrics } = await this.collect();
    return resourceMetrics.scopeMetrics.flatMap((scope) =>
      scope.metrics.filter((metric) => metric.descriptor.name === name).flatMap((metric) => metric.dataPoints as DataPoint<unknown>[]),
    );
  }
}
