import type { DatabaseAdapter } from 'outboxer';

/**
 * The isolation level of the transactions an adapter's relay side opens on MySQL
 * (`executeAtomically`), as InnoDB lists the transaction once it has read a table: `SET
 * TRANSACTION` leaves `@@transaction_isolation`, the session's level, as it was.
 */
export async function relayTransactionIsolation(database: DatabaseAdapter): Promise<unknown> {
  await database.execute({
    text: 'CREATE TABLE IF NOT EXISTS isolation_probe (id INT PRIMARY KEY)',
    values: [],
  });
  const [, rows] = await database.executeAtomically([
    { text: 'SELECT id FROM isolation_probe', values: [] },
    {
      text: 'SELECT trx_isolation_level AS level FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()',
      values: [],
    },
  ]);
  return rows?.[0]?.level;
}
