/**
 * One AIP runtime double: the gateway's key and principal, the control plane, the callback
 * ingress, the connector-event ingress (its registry fed by the control plane's registrations
 * and leases) and the dispatcher that share them. Hosts launched against it register the DIDs
 * the control plane and the ingresses trust; a host publishes run events to `events.url` when
 * started with AIP_CONNECTOR_HOST_EVENT_ENDPOINT set to it.
 */
import { startCallbackIngress, type CallbackIngress } from './callback-ingress.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { gatewayParty, type Party } from './deployment.js';
import { createDispatcher, type Dispatcher } from './dispatcher.js';
import { type EventIngress, startEventIngress } from './event-ingress.js';
import { createRegistry } from './registry.js';

export interface AipRuntime {
  readonly gateway: Party;
  readonly control: ControlPlane;
  readonly ingress: CallbackIngress;
  /** `POST /aip/v1/connector-events`, signed by the gateway. */
  readonly events: EventIngress;
  readonly dispatcher: Dispatcher;
  /** The lease lifetime the control plane grants (the hosts get the same LEASE_TTL_MS). */
  readonly leaseTtlMs: number;
  /** Resolves once the manifests of the registrations granted so far are read (admitted when their digest matches). */
  admitted(): Promise<void>;
  /** Host DIDs the control plane accepts signatures from. */
  readonly hostDids: string[];
  close(): Promise<void>;
}

export async function startAipRuntime(options: { leaseTtlMs?: number } = {}): Promise<AipRuntime> {
  const leaseTtlMs = options.leaseTtlMs ?? 30_000;
  const hostDids: string[] = [];
  const gateway = gatewayParty();
  const admissions: Promise<void>[] = [];
  const control = await startControlPlane({ hostDids: () => hostDids, leaseTtlMs, onRecord: (record) => void admissions.push(registry.admit(record)) });
  const registry = createRegistry(control);
  const ingress = await startCallbackIngress(gateway);
  const events = await startEventIngress({ central: gateway, replica: registry.replica, version: registry.version });
  return {
    gateway,
    control,
    ingress,
    events,
    dispatcher: createDispatcher(gateway, ingress),
    leaseTtlMs,
    admitted: async () => {
      await Promise.all(admissions);
    },
    hostDids,
    close: async () => {
      await Promise.all([control.close(), ingress.close(), events.close(), ...admissions]);
    },
  };
}
