import type { Dialect } from '../../core/dialect.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';

/** The databases an ORM adapter (TypeORM, Prisma) runs on, by the name of its `dialect` option. */
export type OrmDialectName = 'postgres' | 'mysql';

/**
 * The dialect of an ORM adapter: the database its library is set up for (`detected`, read from the
 * library's own configuration; undefined where it does not say), or the `dialect` option `name`,
 * which must agree with it. Postgres when neither says.
 *
 * @param option the option's path, such as `typeorm.dialect`
 * @param setUpFor the library's setting, for the message: `the DataSource is of type "mysql"`
 */
export function chooseOrmDialect(
  option: string,
  name: unknown,
  detected: OrmDialectName | undefined,
  setUpFor: string,
): Dialect {
  if (name !== undefined && name !== 'postgres' && name !== 'mysql') {
    throw invalidOption(option, '"postgres" or "mysql"', name);
  }
  if (name !== undefined && detected !== undefined && name !== detected) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      `Option "${option}" is "${name}", but ${setUpFor} (${detected}): leave the option out, or make them agree.`,
    );
  }
  return (detected ?? name) === 'mysql' ? mysqlDialect : postgresDialect;
}
