/**
 * Names a relay checks for every message (a Kafka topic, a NATS subject) that a batch repeats:
 * each distinct name is checked once per batch. A value that is not a string is checked every time.
 */
export class CheckedNames {
  private readonly problems = new Map<string, string | undefined>();

  /** `check` returns what is wrong with a name, or undefined. */
  constructor(private readonly check: (name: unknown) => string | undefined) {}

  problem(name: unknown): string | undefined {
    if (typeof name !== 'string') return this.check(name);
    if (this.problems.has(name)) return this.problems.get(name);
    const problem = this.check(name);
    this.problems.set(name, problem);
    return problem;
  }
}
