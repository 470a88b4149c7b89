/**
 * The figures behind the chart: a small ring buffer of `counts()` samples per outbox, kept in the
 * handler's memory. A sample is taken when the page asks for the overview (at most one per
 * `minGap`), so the chart covers the minutes someone has been watching, across every open page.
 */

/** One sample of an outbox's figures. */
export interface Sample {
  /** Unix milliseconds. */
  readonly at: number;
  readonly pending: number;
  readonly dead: number;
  readonly delivered: number;
}

export class History {
  private readonly samples = new Map<string, Sample[]>();

  /**
   * @param capacity samples kept per outbox (the oldest go first)
   * @param minGap milliseconds below which a new sample replaces the last one instead of adding
   */
  constructor(
    private readonly capacity: number,
    private readonly minGap: number,
  ) {}

  add(outbox: string, sample: Sample): void {
    let list = this.samples.get(outbox);
    if (list === undefined) {
      list = [];
      this.samples.set(outbox, list);
    }
    const last = list[list.length - 1];
    if (last !== undefined && sample.at - last.at < this.minGap) {
      // Several pages refreshing at once: keep the newest figures, not one sample each.
      if (list.length > 1) list[list.length - 1] = sample;
      else list.push(sample);
      return;
    }
    list.push(sample);
    if (list.length > this.capacity) list.splice(0, list.length - this.capacity);
  }

  list(outbox: string): readonly Sample[] {
    return this.samples.get(outbox) ?? [];
  }
}
