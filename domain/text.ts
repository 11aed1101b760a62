/**
 * PostgreSQL cannot store U+0000 in text or jsonb (SQLSTATE 22P05), and refuses a lone UTF-16
 * surrogate in jsonb (postgres.js would silently turn one into U+FFFD in text). Every string a
 * request may carry is checked against this at validation, so such input never reaches the
 * database (nor a workflow that would retry writing it).
 */
export const unstorableText = /\u0000|\p{Cs}/u;
export const storable = 'must not contain U+0000 or a lone surrogate (PostgreSQL cannot store them)';
