// Package sandboxcheck runs the executor against the real sandbox PSP
// (sandbox/psp) instead of the in-process stand-in. It lives apart from the
// executor's own tests so that work in progress on the sandbox can never
// stop those from compiling.
package sandboxcheck
