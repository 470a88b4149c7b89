import type { Row, SqlQuery, Statement } from '../../core/sql.js';

/**
 * The one owner of a statement's placeholders: each value added gets the next placeholder, so text
 * and values cannot drift apart. Postgres numbers them (`$1`, `$2`…; keep the returned placeholder
 * to use a value twice), SQLite and MySQL take them in order (`?`; add a value again to use it twice).
 * Build the text in one template literal, left to right, so that positional values line up.
 */
export class Parameters {
  readonly values: unknown[] = [];

  private constructor(private readonly numbered: boolean) {}

  /** `$1`, `$2`…: Postgres. */
  static numbered(): Parameters {
    return new Parameters(true);
  }

  /** `?` in order: SQLite and MySQL. */
  static positional(): Parameters {
    return new Parameters(false);
  }

  /** Adds a value and returns its placeholder. */
  add(value: unknown): string {
    this.values.push(value);
    return this.numbered ? `$${this.values.length}` : '?';
  }

  /**
   * Adds each value and returns their placeholders separated by commas, for `IN (…)`; `NULL` for
   * none, so that `IN (NULL)` matches nothing. (MySQL has no array parameters.)
   */
  list(values: readonly unknown[]): string {
    return values.length === 0 ? 'NULL' : values.map((value) => this.add(value)).join(', ');
  }

  /** Adds a value as JSON text (arrays for `json_each`, `unnest` of a JSON array). */
  json(value: unknown): string {
    return this.add(JSON.stringify(value));
  }

  query(text: string, prepare = false): SqlQuery {
    return prepare ? { text, values: this.values, prepare } : { text, values: this.values };
  }

  statement<R>(text: string, read: (rows: readonly Row[]) => R, prepare = false): Statement<R> {
    return { ...this.query(text, prepare), read };
  }
}
