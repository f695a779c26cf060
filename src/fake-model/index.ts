/**
 * A fake OpenAI-compatible model for running the real Hermes Agent on loopback: stateless, it
 * answers each chat-completions request from that request alone (see `decideReply`).
 */
export { startFakeModel, type FakeModel, type FakeModelOptions, type FakeModelRequest } from './server.js';
export { decideReply, type FakeReply } from './reply.js';
export { FAKE_MODEL_ID } from './completion.js';
