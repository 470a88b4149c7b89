/** The reference adapter through the same behaviour suite as the data-layer adapters. */
import pg from 'pg';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { adapterBehaviour } from './behaviour.js';

adapterBehaviour<PgTransactionClient>({
  name: 'pg',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const pool = new pg.Pool({ connectionString: target.urlWithSchema, max: 4 });
    const inTransaction = async <T>(
      fn: (tx: pg.PoolClient) => T | Promise<T>,
      commit: boolean,
    ): Promise<T> => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query(commit ? 'COMMIT' : 'ROLLBACK');
        return result;
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    };
    return {
      database: nodePostgres(pool),
      transaction: (fn) => inTransaction(fn, true),
      rollback: async (fn) => void (await inTransaction(fn, false)),
      notTransactions: () => ({ pool }),
      close: () => pool.end(),
    };
  },
});
