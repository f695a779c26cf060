import { HermesFailure } from '../failures.js';
import { CallScope } from '../transport/call-scope.js';
import type { EndpointOffer } from '../discovery/offer.js';
import { callJson, type JsonRequest } from './json-call.js';
import type { OperationCall, OperationOutcome } from './operation.js';

/** The pauses before each resend: a restarting Hermes is usually back within a few seconds. */
const RESEND_PAUSES_MS = [250, 1_000, 2_000, 4_000];

/**
 * `callJson`, and where the endpoint offers `resendable` (it answers a repeated key with the first
 * request's outcome), the same request sent again while its answer is lost (a connection cut or a
 * timeout after the request may have reached Hermes), within the call's deadline. The offer is read
 * again before each resend; an endpoint that does not declare it is never asked again: the lost
 * answer stays an uncertain outcome, as a resend could act twice.
 */
export async function callJsonResendingLostAnswers(
  call: OperationCall<unknown>,
  request: JsonRequest,
  resendable: (offer: EndpointOffer) => boolean,
): Promise<OperationOutcome> {
  try {
    return await callJson(call, request);
  } catch (error) {
    if (!isLostAnswer(error) || !(await mayResend(call, resendable))) throw error;
    return resend(call, request, resendable, error);
  }
}

async function resend(
  call: OperationCall<unknown>,
  request: JsonRequest,
  resendable: (offer: EndpointOffer) => boolean,
  lost: HermesFailure,
): Promise<OperationOutcome> {
  let failure = lost;
  for (const [attempt, pauseMs] of RESEND_PAUSES_MS.entries()) {
    if (!(await pause(call, pauseMs))) break;
    const verdict = await mayResendNow(call, resendable);
    if (verdict === 'no') break;
    if (verdict === 'unreachable') continue;
    call.logger.warn({ attempt: attempt + 1, template: request.route.template }, 'hermes answer lost: asking again with the same idempotency key');
    try {
      return await callJson(call, request);
    } catch (error) {
      if (!isLostAnswer(error)) throw error;
      failure = error;
    }
  }
  throw failure;
}

/** A transport failure after the request may have reached Hermes: its answer, not its effect, is what is missing. */
function isLostAnswer(error: unknown): error is HermesFailure {
  return error instanceof HermesFailure && error.code === 'transport' && error.effect === 'maybe';
}

/**
 * Whether the offer as last read allows a resend, or could not be read: then it is read afresh after
 * each pause (0.22, busy starting the run it just accepted, was seen to take over 5 s to declare it).
 */
async function mayResend(call: OperationCall<unknown>, resendable: (offer: EndpointOffer) => boolean): Promise<boolean> {
  const offer = await call.offers.of(call.endpoint, call.context.signal);
  return offer.source === 'unreadable' || resendable(offer);
}

/** The offer read afresh: the endpoint may be back as another release, which must declare the resend safe too. */
async function mayResendNow(call: OperationCall<unknown>, resendable: (offer: EndpointOffer) => boolean): Promise<'yes' | 'no' | 'unreachable'> {
  const offer = await call.offers.current(call.endpoint, call.context.signal);
  if (offer.source === 'unreadable') return 'unreachable';
  return resendable(offer) ? 'yes' : 'no';
}

/** Waits `ms`, unless the call's deadline, its caller's signal or the connector's close comes first; true when the whole pause passed. */
function pause(call: OperationCall<unknown>, ms: number): Promise<boolean> {
  const scope = new CallScope({ signal: call.context.signal, openCalls: call.openCalls, deadline: call.deadline, timeoutMs: ms, now: call.config.now });
  return new Promise((resolve) => scope.onAbort({ abort: () => resolve(scope.cause === 'timeout') }));
}
