/** `SERVER_STATUS_IN_TRANS` and `SERVER_STATUS_AUTOCOMMIT` of the protocol's OK packet. */
const IN_TRANSACTION = 0x0001;
const AUTOCOMMIT = 0x0002;

/**
 * True when the result header of a statement that returned no rows (mysql2's `ResultSetHeader`,
 * the protocol's OK packet) says its connection is outside any transaction, in autocommit: the
 * connection never began one, or InnoDB rolled it back on a deadlock and the statements after it
 * would each commit on their own. False when there is no header to read.
 */
export function autocommitting(header: unknown): boolean {
  const status = (header as { serverStatus?: unknown } | null)?.serverStatus;
  return typeof status === 'number' && (status & IN_TRANSACTION) === 0 && (status & AUTOCOMMIT) !== 0;
}
