// Package standin holds the HTTP plumbing the sandbox stand-ins share:
// the Recorder their request logs use to remember the status each
// request was answered (the PSP's witness of what each attempt sent and
// got back), and the JSON answer (WriteJSON) and health check (Healthz)
// of the model and WhatsApp stand-ins.
//
// A Recorder's status stays 0 when the handler never answered: the fault
// injector dropped the connection (drop-after), which is what the logs
// must show.
//
// This package imports only the standard library; only the packages
// under sandbox/ import it.
package standin
