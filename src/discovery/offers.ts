import type { ResolvedEndpoint } from '../config.js';
import { USER_AGENT } from '../internal/package-info.js';
import { CallScope, type OpenCalls } from '../transport/call-scope.js';
import { exchange } from '../transport/http-exchange.js';
import { type EndpointPools, isSuccess, jsonBodyLimit, jsonBodyOf } from '../transport/http.js';
import { type EndpointOffer, offerFromCapabilities, undeclaredOffer } from './offer.js';

export const CAPABILITIES_PATH = '/v1/capabilities';
/** The declaration is small (about 4 KiB on 0.22); a larger answer is not a declaration. */
const MAX_CAPABILITIES_BYTES = 256 * 1024;
/** A declaration that takes longer than this is treated as not read: the call that needed it goes on without it. */
const READ_TIMEOUT_MS = 5_000;

export interface EndpointOffersOptions {
  readonly pools: EndpointPools;
  readonly openCalls: OpenCalls;
  readonly now: () => number;
}

/**
 * Each endpoint's offer, read once and shared by concurrent callers. An offer read from a served
 * declaration is kept until `forget()` (a transport failure: Hermes may have restarted, perhaps as
 * another release); an unreadable one is read again at the next use.
 */
export class EndpointOffers {
  readonly #options: EndpointOffersOptions;
  readonly #offers = new Map<string, Promise<EndpointOffer>>();
  readonly #known = new Map<string, EndpointOffer>();

  constructor(options: EndpointOffersOptions) {
    this.#options = options;
  }

  /** The endpoint's offer; never rejects (an unreadable declaration offers nothing beyond the pin). */
  of(endpoint: ResolvedEndpoint, signal?: AbortSignal): Promise<EndpointOffer> {
    const cached = this.#offers.get(endpoint.id);
    if (cached) return cached;
    const reading = this.#read(endpoint, signal).then((offer) => {
      this.#known.set(endpoint.id, offer);
      if (offer.source === 'unreadable' && this.#offers.get(endpoint.id) === reading) this.#offers.delete(endpoint.id);
      return offer;
    });
    this.#offers.set(endpoint.id, reading);
    return reading;
  }

  /** The endpoint's offer read afresh: before a request is sent again, the endpoint may have come back as another release. */
  current(endpoint: ResolvedEndpoint, signal?: AbortSignal): Promise<EndpointOffer> {
    this.forget(endpoint.id);
    return this.of(endpoint, signal);
  }

  /** Reads the declaration again at the endpoint's next use. */
  forget(endpointId: string): void {
    this.#offers.delete(endpointId);
  }

  /** The offer last read for the endpoint, if any (for manifests, evidence and reports: never triggers a read). */
  lastRead(endpointId: string): EndpointOffer | undefined {
    return this.#known.get(endpointId);
  }

  async #read(endpoint: ResolvedEndpoint, signal: AbortSignal | undefined): Promise<EndpointOffer> {
    const { pools, openCalls, now } = this.#options;
    const scope = new CallScope({ signal, openCalls, deadline: undefined, timeoutMs: READ_TIMEOUT_MS, now });
    const headers = { authorization: `Bearer ${endpoint.apiKey?.reveal() ?? ''}`, 'user-agent': USER_AGENT, accept: 'application/json' };
    try {
      const response = await exchange(
        pools.targetFor(endpoint),
        { method: 'GET', path: CAPABILITIES_PATH, headers, headersTimeoutMs: READ_TIMEOUT_MS, bodyTimeoutMs: READ_TIMEOUT_MS },
        scope,
        jsonBodyLimit(MAX_CAPABILITIES_BYTES),
      );
      if (response.statusCode === 404) return undeclaredOffer(now(), 'not_served');
      if (!isSuccess(response.statusCode)) return undeclaredOffer(now(), 'unreadable');
      return offerFromCapabilities(jsonBodyOf(response, MAX_CAPABILITIES_BYTES, endpoint), now());
    } catch {
      return undeclaredOffer(now(), 'unreadable');
    } finally {
      scope.dispose();
    }
  }
}
