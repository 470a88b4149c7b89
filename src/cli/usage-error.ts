/** An error the CLI reports as it is, without a stack: its message says what to do. */
export class CliError extends Error {
  constructor(
    message: string,
    /** 1: the operation failed or was declined; 2: the command line or environment is wrong. */
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The command line or the environment is wrong (exit code 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = 'UsageError';
  }
}
