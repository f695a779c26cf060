/** Column values as both SQL backends return them: PostgreSQL gives BIGINT columns as strings, so numbers go through Number. */
export const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));
export const strOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));
