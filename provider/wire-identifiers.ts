import { z } from 'zod';

/**
 * The bounds of the identifiers a PSP sends (ids, references, codes, event types), shared by the
 * kinds' wire schemas (provider/<kind>/wire.ts). An identifier is stored in an indexed column,
 * named in a workflow id (domain/ids.ts) and logged, so each is bounded where it is read: a signed
 * event with a longer one is unreadable (ProviderEventUnreadableError naming its path: 400
 * `invalid_request` at the inbound route, nothing stored), never a 5xx from PostgreSQL's index or
 * Temporal's workflow id limit. The bound is the PSP's documented length where it documents one
 * (a kind's wire schema passes it: a 16-character PSP reference, an 80-character merchant
 * reference), else 255: PSPs that document no bound allow ids up to 255 characters, and none we
 * store needs more.
 */
export const PSP_IDENTIFIER_MAX_LENGTH = 255;

/** An event type or an event code: PSPs use short words (the longest we know about 50 characters). */
export const PSP_EVENT_TYPE_MAX_LENGTH = 128;

/** An identifier of at most `max` characters (default PSP_IDENTIFIER_MAX_LENGTH); may be empty. */
export const pspText = (max: number = PSP_IDENTIFIER_MAX_LENGTH) => z.string().max(max, `must be at most ${max} characters`);

/** An identifier of 1 to `max` characters (default PSP_IDENTIFIER_MAX_LENGTH). */
export const pspId = (max: number = PSP_IDENTIFIER_MAX_LENGTH) => pspText(max).min(1);
