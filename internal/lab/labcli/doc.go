// Package labcli is the lab's command line: demo, sandbox (the PSP, in
// its API Pix and v1 flavours, the model and WhatsApp stand-ins),
// restart-test and soak. It registers them into internal/cli's command
// table at init; cmd/retrysafe-lab links it, cmd/retrysafe does not, so
// that a deployment's binary carries none of the lab.
//
// A command here parses its flags and hands the work to the package that
// does it: the stand-ins to sandbox/*, the restart test and the soak to
// internal/lab/restarttest, the demo's deployment to internal/lab/harness. The
// demo's two stories (the v1 PSP and API Pix) share their steps
// (demo_steps.go): delivering the message twice, waiting for the armed
// worker's crash and for the conversation to settle, reading the outcome,
// asking the sidecar. The in-memory stand-ins share their listen, log and
// fault flags (standinFlags); restart-test and soak share their process
// log and report (openProcessLog, writeLabReport).
//
// # Imports
//
// internal/cli (the command table and the shared flags), internal/lab/harness,
// internal/lab/restarttest, sandbox/apipix, sandbox/fault, sandbox/model,
// sandbox/psp, sandbox/cloudapi, idempotency (the PSP's policy in its
// help) and tools/apipix. Only cmd/retrysafe-lab imports it.
package labcli
